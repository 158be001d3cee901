-- Persisted mutation jobs: the only way page and component source changes (spec rule 3).
-- Workers in every cell replica claim pending jobs under a lease (lease_owner, lease_until),
-- renew it while running, and a rescuer returns jobs whose lease ended to the queue. Queue
-- transitions are single-row compare-and-set statements; the business commit of a job is one
-- serializable transaction that also finishes the job.
CREATE TABLE mutation_jobs (
    workspace_id      TEXT NOT NULL,
    id                TEXT NOT NULL,
    kind              TEXT NOT NULL,
    owner_id          TEXT NOT NULL,
    input             JSONB NOT NULL,
    status            TEXT NOT NULL CHECK (status IN ('pending', 'running', 'succeeded', 'failed', 'canceled')),
    attempt_count     INT8 NOT NULL DEFAULT 0 CHECK (attempt_count >= 0),
    max_attempts      INT8 NOT NULL CHECK (max_attempts >= 1 AND attempt_count < max_attempts),
    retry_of_job_id   TEXT,
    stage             TEXT NOT NULL DEFAULT '',
    progress          INT8 NOT NULL DEFAULT 0 CHECK (progress >= 0 AND progress <= 100),
    cancel_requested  BOOL NOT NULL DEFAULT false,
    error_code        TEXT NOT NULL DEFAULT '',
    error_summary     TEXT NOT NULL DEFAULT '',
    result            JSONB,
    run_after         TIMESTAMPTZ NOT NULL,
    lease_owner       TEXT NOT NULL DEFAULT '',
    lease_until       TIMESTAMPTZ,
    created_at        TIMESTAMPTZ NOT NULL,
    started_at        TIMESTAMPTZ,
    finished_at       TIMESTAMPTZ,
    updated_at        TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (workspace_id, id)
);

-- What workers claim from and what the rescuer scans: only live rows, so both stay small.
CREATE INDEX mutation_jobs_pending_idx ON mutation_jobs (run_after) WHERE status = 'pending';
CREATE INDEX mutation_jobs_running_idx ON mutation_jobs (lease_until) WHERE status = 'running';
