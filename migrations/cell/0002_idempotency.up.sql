-- Idempotency keys: the boundary is workspace + user + operation + key. A row is 'executing'
-- under a lease (so a crash never leaves a key stuck) and 'done' with the first answer stored
-- for replay until expires_at, after which the purger deletes it.
CREATE TABLE idempotency_keys (
    workspace_id  TEXT NOT NULL,
    user_id       TEXT NOT NULL,
    operation_id  TEXT NOT NULL,
    idem_key      TEXT NOT NULL,
    fingerprint   BYTEA NOT NULL,
    state         TEXT NOT NULL CHECK (state IN ('executing', 'done')),
    lease_until   TIMESTAMPTZ NOT NULL,
    status        INT8 NOT NULL DEFAULT 0,
    headers       JSONB NOT NULL DEFAULT '{}',
    body          BYTEA NOT NULL DEFAULT ''::BYTEA,
    created_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
    expires_at    TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (workspace_id, user_id, operation_id, idem_key)
);

CREATE INDEX idempotency_keys_expiry_idx ON idempotency_keys (expires_at);
