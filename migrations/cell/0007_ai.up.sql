-- Per-workspace AI agent configurations: which catalogue agent, with which settings.
CREATE TABLE agent_configs (
    workspace_id  TEXT NOT NULL,
    agent_key     TEXT NOT NULL,
    enabled       BOOL NOT NULL DEFAULT true,
    settings      JSONB NOT NULL DEFAULT '{}',
    version       INT8 NOT NULL DEFAULT 1 CHECK (version > 0),
    updated_by    TEXT NOT NULL,
    updated_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (workspace_id, agent_key)
);
