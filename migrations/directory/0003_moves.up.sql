-- Moves: the persisted state machine of one workspace move (cellctl workspaces move, cells
-- drain, cells rebalance), replacing the placeholder table of 0001, which nothing wrote.
-- step is the next step to run (plan, precopy, fence, drain, copy, verify, flip, clean, done);
-- status says whether it is under way (active), stopped by an error that resume retries
-- (failed), being rolled back (aborting), or over (done, aborted). A runner (one cellctl process)
-- holds a move under a lease (runner, runner_until) so that two never run one move at once.
DROP TABLE moves;

CREATE TABLE moves (
    id            TEXT PRIMARY KEY,
    workspace_id  TEXT NOT NULL REFERENCES workspaces (id),
    from_cell     TEXT NOT NULL REFERENCES cells (id),
    to_cell       TEXT NOT NULL REFERENCES cells (id),
    from_epoch    INT8 NOT NULL CHECK (from_epoch > 0),
    step          TEXT NOT NULL CHECK (step IN ('plan', 'precopy', 'fence', 'drain', 'copy', 'verify', 'flip', 'clean', 'done')),
    status        TEXT NOT NULL CHECK (status IN ('active', 'failed', 'aborting', 'done', 'aborted')),
    reason        TEXT NOT NULL DEFAULT 'manual' CHECK (reason IN ('manual', 'drain', 'rebalance')),
    error         TEXT NOT NULL DEFAULT '',
    runner        TEXT NOT NULL DEFAULT '',
    runner_until  TIMESTAMPTZ,
    timings       JSONB NOT NULL DEFAULT '{}',
    report        JSONB NOT NULL DEFAULT '{}',
    fenced_at     TIMESTAMPTZ,
    flipped_at    TIMESTAMPTZ,
    clean_after   TIMESTAMPTZ,
    created_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
    finished_at   TIMESTAMPTZ,
    CHECK (from_cell <> to_cell)
);

-- At most one move per workspace is live (not done or aborted), its clean step included.
CREATE UNIQUE INDEX moves_live_idx ON moves (workspace_id) WHERE status NOT IN ('done', 'aborted');
CREATE INDEX moves_created_idx ON moves (created_at);
