-- The job claim's second path (cell/jobs, claimByWorkspaceSQL) walks the workspaces that have
-- pending jobs, one index descent each (a loose index scan), and takes each open workspace's
-- oldest jobs: its cost follows the number of workspaces with pending jobs, not the backlog, so a
-- capped or fenced workspace with a long backlog at the head of the queue no longer makes every
-- claim scan past it. Only live rows are indexed.
CREATE INDEX mutation_jobs_pending_ws_idx ON mutation_jobs (workspace_id, run_after) WHERE status = 'pending';
