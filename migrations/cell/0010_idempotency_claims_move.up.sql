-- Executing records of the earlier scheme become claims; idempotency_keys then holds answers only.
INSERT INTO idempotency_claims (workspace_id, user_id, operation_id, idem_key, fingerprint, attempt, lease_until, created_at)
SELECT workspace_id, user_id, operation_id, idem_key, fingerprint, attempt, lease_until, created_at
FROM idempotency_keys WHERE state = 'executing';

DELETE FROM idempotency_keys WHERE state = 'executing';
