-- Projects. Archived rows keep archived_at and leave every default query; nothing is deleted.
CREATE TABLE projects (
    workspace_id  TEXT NOT NULL,
    id            TEXT NOT NULL,
    name          TEXT NOT NULL,
    description   TEXT NOT NULL DEFAULT '',
    version       INT8 NOT NULL DEFAULT 1 CHECK (version > 0),
    created_by    TEXT NOT NULL,
    created_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
    archived_at   TIMESTAMPTZ,
    PRIMARY KEY (workspace_id, id)
);
