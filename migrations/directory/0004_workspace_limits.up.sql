-- Per-workspace overrides of a cell's noisy-neighbour limits (cellctl workspaces limit). A
-- column left NULL keeps the cell's default (CELL_RATE_WORKSPACE, CELL_RATE_WORKSPACE_BURST,
-- CELL_JOB_WORKSPACE_CONCURRENCY). Cells read this through their directory cache.
CREATE TABLE workspace_limits (
    workspace_id         TEXT PRIMARY KEY REFERENCES workspaces (id),
    requests_per_second  FLOAT8 CHECK (requests_per_second > 0),
    burst                INT8 CHECK (burst >= 1),
    job_concurrency      INT8 CHECK (job_concurrency >= 1),
    updated_at           TIMESTAMPTZ NOT NULL DEFAULT now()
);
