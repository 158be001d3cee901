-- idempotency_keys now holds answers only, each written in the transaction of its request's
-- writes. Rows left 'executing' by the earlier scheme belong to executions that are over (their
-- two-minute leases ended before any upgrade finishes) and are dropped; every answer gets its lock.
DELETE FROM idempotency_keys WHERE state = 'executing';

INSERT INTO idempotency_locks (workspace_id, user_id, operation_id, idem_key, expires_at)
SELECT workspace_id, user_id, operation_id, idem_key, expires_at FROM idempotency_keys
ON CONFLICT (workspace_id, user_id, operation_id, idem_key) DO NOTHING;
