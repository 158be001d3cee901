-- The one scheduling-state row every coordinator locks to dispatch.
INSERT INTO render_scheduler_state (id, round, updated_at) VALUES (1, 0, now()) ON CONFLICT (id) DO NOTHING;
