-- Render retention (cell/render/retention.go): requests past RENDER_RETENTION_SECONDS are found
-- by finished_at whatever their reference state, and the orphan sweep asks whether a manifest
-- is still a request's by (workspace_id, snapshot_ref).
CREATE INDEX render_requests_finished_idx ON render_requests (finished_at) WHERE finished_at IS NOT NULL;
CREATE INDEX render_requests_snapshot_idx ON render_requests (workspace_id, snapshot_ref);
