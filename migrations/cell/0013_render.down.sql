DROP TABLE render_results;
DROP TABLE render_scheduler_state;
DROP TABLE render_workers;
DROP TABLE render_attempts;
DROP TABLE render_requests;
