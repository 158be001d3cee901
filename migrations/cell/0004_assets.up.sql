-- Assets: metadata rows of uploaded files. The bytes live in the cell's blob store under a
-- content-addressed key (blob_key = ws/<workspace_id>/sha256/<hex>); a blob is never
-- overwritten, so a row may share its blob with copies and older rows keep their bytes after a
-- content replacement. Archived rows keep archived_at and leave every default query.
-- The allow-list of content types and the size limit live in cell/blob (one place); the checks
-- here only guard the shape of what is stored.
CREATE TABLE assets (
    workspace_id  TEXT NOT NULL,
    id            TEXT NOT NULL,
    name          TEXT NOT NULL CHECK (char_length(name) BETWEEN 1 AND 255),
    content_type  TEXT NOT NULL CHECK (content_type LIKE '%/%'),
    byte_size     INT8 NOT NULL CHECK (byte_size > 0),
    sha256        TEXT NOT NULL CHECK (char_length(sha256) = 64),
    blob_key      TEXT NOT NULL CHECK (blob_key LIKE 'ws/%/sha256/%'),
    tags          TEXT[] NOT NULL DEFAULT '{}',
    metadata      JSONB NOT NULL DEFAULT '{}',
    version       INT8 NOT NULL DEFAULT 1 CHECK (version > 0),
    created_by    TEXT NOT NULL,
    created_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
    archived_at   TIMESTAMPTZ,
    PRIMARY KEY (workspace_id, id),
    CHECK (COALESCE(array_length(tags, 1), 0) <= 32)
);
