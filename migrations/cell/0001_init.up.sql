-- Cell database: everything a hosted workspace owns. Every workspace-owned table starts its
-- primary key with workspace_id.

-- One row per workspace this cell hosts or hosted. The tenancy guard answers a workspace only
-- while its row is active at the epoch the router routed with.
CREATE TABLE tenancy (
    workspace_id  TEXT PRIMARY KEY,
    epoch         INT8 NOT NULL CHECK (epoch > 0),
    state         TEXT NOT NULL CHECK (state IN ('active', 'fenced', 'moved')),
    owner_hint    TEXT NOT NULL DEFAULT '',
    updated_at    TIMESTAMPTZ NOT NULL DEFAULT now()
);
