DELETE FROM idempotency_locks;
