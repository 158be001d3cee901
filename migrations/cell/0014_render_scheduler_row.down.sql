DELETE FROM render_scheduler_state WHERE id = 1;
