-- Render operability (render-execution.md, "Deadline and cancellation" 3; docs/render.md).
-- render_workers learns where each epoch runs (boot_id, cgroup_id: a new epoch proves an older
-- one's processes gone only on the same host boot and cgroup) and when it was quarantined (a
-- probe lifts a quarantine after its cool-down). render_operator_actions is the audit record of
-- what operators (and probes) did to renderers: who, why, when, and which attempts it released.
ALTER TABLE render_workers ADD COLUMN boot_id TEXT NOT NULL DEFAULT '';
ALTER TABLE render_workers ADD COLUMN cgroup_id TEXT NOT NULL DEFAULT '';
ALTER TABLE render_workers ADD COLUMN quarantined_at TIMESTAMPTZ;

CREATE TABLE render_operator_actions (
    id                 TEXT NOT NULL PRIMARY KEY,
    worker_id          TEXT NOT NULL,
    epoch              TEXT NOT NULL,
    action             TEXT NOT NULL CHECK (action IN ('release', 'retire', 'unquarantine', 'probe_lift')),
    operator           TEXT NOT NULL CHECK (length(operator) BETWEEN 1 AND 200),
    reason             TEXT NOT NULL CHECK (length(reason) BETWEEN 1 AND 1000),
    attempts_released  JSONB NOT NULL DEFAULT '[]',
    created_at         TIMESTAMPTZ NOT NULL
);
CREATE INDEX render_operator_actions_worker_idx ON render_operator_actions (worker_id, created_at);
