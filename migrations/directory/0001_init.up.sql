-- Directory database: cells, placements, users, tokens, workspaces, memberships.
-- Dialect common to PostgreSQL and CockroachDB: TEXT + CHECK instead of enums, random keys.

CREATE TABLE cells (
    id              TEXT PRIMARY KEY,
    internal_url    TEXT NOT NULL,
    state           TEXT NOT NULL DEFAULT 'active' CHECK (state IN ('active', 'draining', 'down')),
    max_workspaces  INT8 NOT NULL DEFAULT 0,
    created_at      TIMESTAMPTZ NOT NULL DEFAULT now()
);

CREATE TABLE users (
    id          TEXT PRIMARY KEY,
    email       TEXT NOT NULL UNIQUE,
    name        TEXT NOT NULL,
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now()
);

CREATE TABLE tokens (
    id          TEXT PRIMARY KEY,
    user_id     TEXT NOT NULL REFERENCES users (id),
    hash        BYTEA NOT NULL UNIQUE,
    name        TEXT NOT NULL DEFAULT '',
    scopes      TEXT[] NOT NULL,
    expires_at  TIMESTAMPTZ NOT NULL,
    revoked_at  TIMESTAMPTZ,
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now()
);

CREATE INDEX tokens_user_idx ON tokens (user_id);

CREATE TABLE workspaces (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL,
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now()
);

CREATE TABLE placements (
    workspace_id  TEXT PRIMARY KEY REFERENCES workspaces (id),
    cell_id       TEXT NOT NULL REFERENCES cells (id),
    epoch         INT8 NOT NULL DEFAULT 1 CHECK (epoch > 0),
    state         TEXT NOT NULL DEFAULT 'active' CHECK (state IN ('active', 'moving')),
    pinned        BOOL NOT NULL DEFAULT false,
    updated_at    TIMESTAMPTZ NOT NULL DEFAULT now()
);

CREATE INDEX placements_cell_idx ON placements (cell_id);

CREATE TABLE memberships (
    workspace_id  TEXT NOT NULL REFERENCES workspaces (id),
    user_id       TEXT NOT NULL REFERENCES users (id),
    role          TEXT NOT NULL CHECK (role IN ('owner', 'admin', 'editor', 'viewer')),
    created_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (workspace_id, user_id)
);

CREATE INDEX memberships_user_idx ON memberships (user_id);

-- A move is a persisted state machine; the move workflow fills it in.
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
