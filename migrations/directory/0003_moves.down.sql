DROP TABLE moves;

CREATE TABLE moves (
    id            TEXT PRIMARY KEY,
    workspace_id  TEXT NOT NULL REFERENCES workspaces (id),
    from_cell     TEXT NOT NULL REFERENCES cells (id),
    to_cell       TEXT NOT NULL REFERENCES cells (id),
    state         TEXT NOT NULL CHECK (state IN ('pending', 'copying', 'verifying', 'flipping', 'done', 'failed', 'aborted')),
    detail        TEXT NOT NULL DEFAULT '',
    created_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at    TIMESTAMPTZ NOT NULL DEFAULT now()
);
