DROP TABLE idempotency_locks;
