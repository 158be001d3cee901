-- The render control plane (render-execution.md, "Persisted models"). render_requests is the
-- persistent queue and the only source of the render stage's state; render_attempts are the
-- physical executions and the capacity they hold; render_workers are the executor nodes
-- (worker/epoch) taken from RENDER_WORKERS_CONFIG; render_scheduler_state is the one row every
-- coordinator locks to dispatch; render_results are the verified results. No secret, ticket,
-- preview token or signed URL is stored. Workspace-owned tables have workspace_id first in their
-- primary key (a move carries them); workers and scheduler state belong to the cell.
CREATE TABLE render_requests (
    workspace_id     TEXT NOT NULL,
    id               TEXT NOT NULL,
    request_key      TEXT NOT NULL,
    owner            TEXT NOT NULL,
    stage            TEXT NOT NULL,
    operation        TEXT NOT NULL CHECK (operation IN ('page.capture', 'page.diagnose', 'component.diagnose')),
    category         TEXT NOT NULL CHECK (category IN ('interactive', 'background')),
    snapshot_ref     TEXT NOT NULL,
    input_digest     TEXT NOT NULL,
    render_digest    TEXT NOT NULL,
    cache_key        TEXT NOT NULL,
    profile_digest   TEXT NOT NULL,
    viewport         JSONB NOT NULL,
    options          JSONB NOT NULL,
    state            TEXT NOT NULL CHECK (state IN ('queued', 'executing', 'retry_wait', 'succeeded', 'failed', 'cancelled', 'expired')),
    attempts_used    INT8 NOT NULL DEFAULT 0 CHECK (attempts_used >= 0 AND attempts_used <= max_attempts),
    max_attempts     INT8 NOT NULL CHECK (max_attempts >= 1),
    next_seq         INT8 NOT NULL DEFAULT 1 CHECK (next_seq >= 1),
    cancel_version   INT8 NOT NULL DEFAULT 0 CHECK (cancel_version >= 0),
    deadline_at      TIMESTAMPTZ NOT NULL,
    not_before       TIMESTAMPTZ NOT NULL,
    enqueued_at      TIMESTAMPTZ NOT NULL,
    updated_at       TIMESTAMPTZ NOT NULL,
    finished_at      TIMESTAMPTZ,
    error_code       TEXT NOT NULL DEFAULT '',
    error_stage      TEXT NOT NULL DEFAULT '',
    error_message    TEXT NOT NULL DEFAULT '',
    artifact_released BOOL NOT NULL DEFAULT false,
    PRIMARY KEY (workspace_id, id),
    UNIQUE (workspace_id, request_key)
);

-- The queue: only waiting rows, so dispatch scans stay small.
CREATE INDEX render_requests_waiting_idx ON render_requests (category, workspace_id, enqueued_at)
    WHERE state IN ('queued', 'retry_wait');
-- Wait promotion: the oldest waiting request.
CREATE INDEX render_requests_waiting_age_idx ON render_requests (enqueued_at)
    WHERE state IN ('queued', 'retry_wait');
-- The deadline sweep and the cleaner.
CREATE INDEX render_requests_live_idx ON render_requests (deadline_at) WHERE state IN ('queued', 'retry_wait', 'executing');
CREATE INDEX render_requests_unreleased_idx ON render_requests (finished_at) WHERE artifact_released = false AND finished_at IS NOT NULL;

CREATE TABLE render_attempts (
    workspace_id     TEXT NOT NULL,
    request_id       TEXT NOT NULL,
    seq              INT8 NOT NULL CHECK (seq >= 1),
    attempt_id       TEXT NOT NULL UNIQUE,
    worker_id        TEXT NOT NULL,
    epoch            TEXT NOT NULL,
    slot_generation  INT8 NOT NULL CHECK (slot_generation >= 1),
    state            TEXT NOT NULL CHECK (state IN ('reserved', 'dispatched', 'accepted', 'running', 'cleaning', 'terminal', 'unknown')),
    released         BOOL NOT NULL DEFAULT false,
    outcome          TEXT NOT NULL DEFAULT '',
    driver           TEXT NOT NULL,
    driver_until     TIMESTAMPTZ NOT NULL,
    created_at       TIMESTAMPTZ NOT NULL,
    dispatched_at    TIMESTAMPTZ,
    accepted_at      TIMESTAMPTZ,
    finished_at      TIMESTAMPTZ,
    released_at      TIMESTAMPTZ,
    error_code       TEXT NOT NULL DEFAULT '',
    error_stage      TEXT NOT NULL DEFAULT '',
    error_message    TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (workspace_id, request_id, seq),
    CHECK (released = (state = 'terminal'))
);

-- At most one unreleased attempt per request, and per worker (whatever its epoch: a new epoch
-- never takes capacity an older one still holds).
CREATE UNIQUE INDEX render_attempts_request_live_idx ON render_attempts (workspace_id, request_id) WHERE released = false;
CREATE UNIQUE INDEX render_attempts_worker_live_idx ON render_attempts (worker_id) WHERE released = false;

CREATE TABLE render_workers (
    worker_id          TEXT NOT NULL,
    epoch              TEXT NOT NULL,
    url                TEXT NOT NULL,
    environment_digest TEXT NOT NULL,
    state              TEXT NOT NULL CHECK (state IN ('ready', 'unready', 'mismatch', 'quarantined', 'retired')),
    slot_generation    INT8 NOT NULL DEFAULT 0 CHECK (slot_generation >= 0),
    detail             TEXT NOT NULL DEFAULT '',
    registered_at      TIMESTAMPTZ NOT NULL,
    heartbeat_at       TIMESTAMPTZ NOT NULL,
    last_dispatch_at   TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (worker_id, epoch)
);

CREATE TABLE render_scheduler_state (
    id                  INT8 NOT NULL PRIMARY KEY CHECK (id = 1),
    round               INT8 NOT NULL DEFAULT 0 CHECK (round >= 0),
    cursor_interactive  TEXT NOT NULL DEFAULT '',
    cursor_background   TEXT NOT NULL DEFAULT '',
    dispatched          INT8 NOT NULL DEFAULT 0,
    updated_at          TIMESTAMPTZ NOT NULL
);

CREATE TABLE render_results (
    workspace_id     TEXT NOT NULL,
    request_id       TEXT NOT NULL,
    attempt_id       TEXT NOT NULL,
    operation        TEXT NOT NULL,
    input_digest     TEXT NOT NULL,
    render_digest    TEXT NOT NULL,
    profile_digest   TEXT NOT NULL,
    host_build       TEXT NOT NULL,
    artifact_key     TEXT NOT NULL DEFAULT '',
    artifact_sha256  TEXT NOT NULL,
    artifact_bytes   INT8 NOT NULL CHECK (artifact_bytes >= 0),
    width            INT8 NOT NULL DEFAULT 0,
    height           INT8 NOT NULL DEFAULT 0,
    diagnosis        JSONB,
    created_at       TIMESTAMPTZ NOT NULL,
    consumed_at      TIMESTAMPTZ,
    PRIMARY KEY (workspace_id, request_id)
);
