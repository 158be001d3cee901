-- Idempotency claims: who is executing a key right now. A claim is bookkeeping only (it turns a
-- concurrent duplicate into a 409 "in flight" instead of wasted work); exactly-once rests on
-- idempotency_keys, whose row, the stored answer, is inserted in the same transaction as the
-- business write. A claim whose lease ended (its process died) may be taken over.
CREATE TABLE idempotency_claims (
    workspace_id  TEXT NOT NULL,
    user_id       TEXT NOT NULL,
    operation_id  TEXT NOT NULL,
    idem_key      TEXT NOT NULL,
    fingerprint   BYTEA NOT NULL,
    attempt       TEXT NOT NULL,
    lease_until   TIMESTAMPTZ NOT NULL,
    created_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (workspace_id, user_id, operation_id, idem_key)
);

CREATE INDEX idempotency_claims_lease_idx ON idempotency_claims (lease_until);
