-- Projects. Archived rows keep archived_at and leave every default query; nothing is deleted.
CREATE TABLE projects (
    workspace_id  TEXT NOT NULL,
    id            TEXT NOT NULL,
    name          TEXT NOT NULL,
    description   TEXT NOT NULL DEFAULT '',
    version       INT8 NOT NULL DEFAULT 1 CHECK (version > 0),
    -- Structured parts, each with its own optimistic-lock version.
    configuration          JSONB NOT NULL DEFAULT '{}',
    configuration_version  INT8 NOT NULL DEFAULT 1 CHECK (configuration_version > 0),
    route_tree             JSONB NOT NULL DEFAULT '{"routes": []}',
    route_tree_version     INT8 NOT NULL DEFAULT 1 CHECK (route_tree_version > 0),
    build_assets           JSONB NOT NULL DEFAULT '[]',
    build_assets_version   INT8 NOT NULL DEFAULT 1 CHECK (build_assets_version > 0),
    created_by    TEXT NOT NULL,
    created_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
    archived_at   TIMESTAMPTZ,
    PRIMARY KEY (workspace_id, id)
);
