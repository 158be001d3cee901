-- The job pool's per-workspace concurrency cap counts a workspace's running jobs at every claim:
-- only live rows are indexed, so the count stays small.
CREATE INDEX mutation_jobs_running_ws_idx ON mutation_jobs (workspace_id) WHERE status = 'running';
