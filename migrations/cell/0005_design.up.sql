-- Design system: workspace font families and faces, themes and styles.

-- Font families. A family exists to hold faces: it is created by the first face that names it
-- (face create/update find or create by name) and removed with its last face unless a theme
-- binds it. The name is unique per workspace, compared case-insensitively through name_key
-- (lower-cased name, computed by the application). Deleting a family is a hard delete: the
-- one the specification names; it is only allowed without faces and without theme bindings.
CREATE TABLE font_families (
    workspace_id  TEXT NOT NULL,
    id            TEXT NOT NULL,
    name          TEXT NOT NULL CHECK (length(name) BETWEEN 1 AND 100),
    name_key      TEXT NOT NULL,
    version       INT8 NOT NULL DEFAULT 1 CHECK (version > 0),
    created_by    TEXT NOT NULL,
    created_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (workspace_id, id)
);

CREATE UNIQUE INDEX font_families_name_idx ON font_families (workspace_id, name_key);

-- Font faces: one uploaded font asset with its @font-face descriptors. font_weight is stored as
-- a range; a single weight has weight_min = weight_max.
CREATE TABLE font_faces (
    workspace_id  TEXT NOT NULL,
    id            TEXT NOT NULL,
    family_id     TEXT NOT NULL,
    asset_id      TEXT NOT NULL,
    weight_min    INT8 NOT NULL CHECK (weight_min BETWEEN 1 AND 1000),
    weight_max    INT8 NOT NULL CHECK (weight_max BETWEEN 1 AND 1000),
    font_style    TEXT NOT NULL CHECK (font_style IN ('normal', 'italic', 'oblique')),
    font_display  TEXT NOT NULL CHECK (font_display IN ('auto', 'block', 'swap', 'fallback', 'optional')),
    unicode_range TEXT NOT NULL DEFAULT '',
    enabled       BOOL NOT NULL DEFAULT true,
    version       INT8 NOT NULL DEFAULT 1 CHECK (version > 0),
    created_by    TEXT NOT NULL,
    created_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (workspace_id, id),
    CHECK (weight_min <= weight_max),
    FOREIGN KEY (workspace_id, family_id) REFERENCES font_families (workspace_id, id)
);

CREATE INDEX font_faces_family_idx ON font_faces (workspace_id, family_id, id);

-- Themes. Per typography role exactly one of a workspace font family or a platform preset is
-- stored (the default preset is written explicitly when the request names neither). Family
-- bindings are checked by the application against live themes only, so there is no foreign key:
-- an archived theme does not keep a family alive. key is unique among live themes; styles
-- reference themes by key.
CREATE TABLE themes (
    workspace_id            TEXT NOT NULL,
    id                      TEXT NOT NULL,
    key                     TEXT NOT NULL,
    name                    TEXT NOT NULL,
    colors                  JSONB NOT NULL,
    spacing                 JSONB NOT NULL,
    radius                  JSONB NOT NULL,
    heading_font_family_id  TEXT,
    heading_font_preset     TEXT CHECK (heading_font_preset IN ('platform-sans', 'system-ui')),
    body_font_family_id     TEXT,
    body_font_preset        TEXT CHECK (body_font_preset IN ('platform-sans', 'system-ui')),
    code_font_family_id     TEXT,
    code_font_preset        TEXT CHECK (code_font_preset IN ('platform-mono', 'monospace')),
    version                 INT8 NOT NULL DEFAULT 1 CHECK (version > 0),
    created_by              TEXT NOT NULL,
    created_at              TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at              TIMESTAMPTZ NOT NULL DEFAULT now(),
    archived_at             TIMESTAMPTZ,
    PRIMARY KEY (workspace_id, id),
    CHECK ((heading_font_family_id IS NULL) <> (heading_font_preset IS NULL)),
    CHECK ((body_font_family_id IS NULL) <> (body_font_preset IS NULL)),
    CHECK ((code_font_family_id IS NULL) <> (code_font_preset IS NULL))
);

CREATE UNIQUE INDEX themes_key_idx ON themes (workspace_id, key) WHERE archived_at IS NULL;

-- Styles: a name and one normalised presentation snapshot (canonical JSON) with its digest.
-- theme_key repeats the snapshot's theme reference for lookups.
CREATE TABLE styles (
    workspace_id     TEXT NOT NULL,
    id               TEXT NOT NULL,
    name             TEXT NOT NULL,
    snapshot         JSONB NOT NULL,
    snapshot_digest  TEXT NOT NULL,
    theme_key        TEXT,
    version          INT8 NOT NULL DEFAULT 1 CHECK (version > 0),
    created_by       TEXT NOT NULL,
    created_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
    archived_at      TIMESTAMPTZ,
    PRIMARY KEY (workspace_id, id)
);
