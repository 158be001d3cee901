-- Pages of a project. Their source and versions arrive through mutation jobs; this table holds
-- what the project views need (listing, route-tree references).
CREATE TABLE pages (
    workspace_id  TEXT NOT NULL,
    id            TEXT NOT NULL,
    project_id    TEXT NOT NULL,
    key           TEXT NOT NULL,
    title         TEXT NOT NULL DEFAULT '',
    file_type     TEXT NOT NULL CHECK (file_type IN ('tsx', 'jsx', 'html')),
    version       INT8 NOT NULL DEFAULT 1 CHECK (version > 0),
    created_by    TEXT NOT NULL,
    created_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
    archived_at   TIMESTAMPTZ,
    PRIMARY KEY (workspace_id, id)
);

CREATE INDEX pages_project_idx ON pages (workspace_id, project_id, key);
