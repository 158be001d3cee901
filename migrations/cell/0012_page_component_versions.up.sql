-- Page and component source, versioned. Source changes only through mutation jobs: a job's
-- business commit writes the next immutable version, moves the current pointer and records the
-- dependencies the compile resolved, in one transaction.
ALTER TABLE pages ADD COLUMN description TEXT NOT NULL DEFAULT '';
ALTER TABLE pages ADD COLUMN tags TEXT[] NOT NULL DEFAULT ARRAY[]::TEXT[];
ALTER TABLE pages ADD COLUMN metadata_version INT8 NOT NULL DEFAULT 1 CHECK (metadata_version > 0);

-- A page key names the page within its project while it is live.
CREATE UNIQUE INDEX pages_live_key_idx ON pages (workspace_id, project_id, key) WHERE archived_at IS NULL;

CREATE TABLE page_versions (
    workspace_id     TEXT NOT NULL,
    page_id          TEXT NOT NULL,
    version          INT8 NOT NULL CHECK (version > 0),
    file_type        TEXT NOT NULL CHECK (file_type IN ('tsx', 'jsx', 'html')),
    source           TEXT NOT NULL,
    source_digest    TEXT NOT NULL,
    compiled_digest  TEXT NOT NULL,
    dependencies     JSONB NOT NULL DEFAULT '[]',
    job_id           TEXT NOT NULL,
    created_by       TEXT NOT NULL,
    created_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (workspace_id, page_id, version)
);

-- Components: a draft (identified by its content hash) and published versions.
CREATE TABLE components (
    workspace_id       TEXT NOT NULL,
    id                 TEXT NOT NULL,
    key                TEXT NOT NULL,
    title              TEXT NOT NULL DEFAULT '',
    description        TEXT NOT NULL DEFAULT '',
    tags               TEXT[] NOT NULL DEFAULT ARRAY[]::TEXT[],
    file_type          TEXT NOT NULL CHECK (file_type IN ('tsx', 'jsx')),
    draft_source       TEXT NOT NULL,
    draft_hash         TEXT NOT NULL,
    published_version  INT8 NOT NULL DEFAULT 0 CHECK (published_version >= 0),
    metadata_version   INT8 NOT NULL DEFAULT 1 CHECK (metadata_version > 0),
    created_by         TEXT NOT NULL,
    created_at         TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at         TIMESTAMPTZ NOT NULL DEFAULT now(),
    archived_at        TIMESTAMPTZ,
    PRIMARY KEY (workspace_id, id)
);

CREATE UNIQUE INDEX components_live_key_idx ON components (workspace_id, key) WHERE archived_at IS NULL;

CREATE TABLE component_versions (
    workspace_id     TEXT NOT NULL,
    component_id     TEXT NOT NULL,
    version          INT8 NOT NULL CHECK (version > 0),
    file_type        TEXT NOT NULL CHECK (file_type IN ('tsx', 'jsx')),
    source           TEXT NOT NULL,
    source_digest    TEXT NOT NULL,
    compiled_digest  TEXT NOT NULL,
    dependencies     JSONB NOT NULL DEFAULT '[]',
    job_id           TEXT NOT NULL,
    created_by       TEXT NOT NULL,
    created_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (workspace_id, component_id, version)
);
