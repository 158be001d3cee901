-- Idempotency locks: a request inserts its key's lock first thing in the transaction of its own
-- writes, and its answer (idempotency_keys) last thing in it. While that transaction runs, the
-- uncommitted lock makes a duplicate wait, then answer "in flight"; if it dies, the lock goes
-- with it; once it commits, lock and answer exist together and a duplicate replays the answer.
-- Both are plain inserts (no read of either table at SERIALIZABLE), so distinct keys never
-- conflict. A lock expires with its answer and the purger deletes both (the answers' expiry
-- index finds them; a lock needs no index of its own beyond its key).
CREATE TABLE idempotency_locks (
    workspace_id  TEXT NOT NULL,
    user_id       TEXT NOT NULL,
    operation_id  TEXT NOT NULL,
    idem_key      TEXT NOT NULL,
    expires_at    TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (workspace_id, user_id, operation_id, idem_key)
);
