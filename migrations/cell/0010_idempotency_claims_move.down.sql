INSERT INTO idempotency_keys (workspace_id, user_id, operation_id, idem_key, fingerprint, state, lease_until, created_at, expires_at, attempt)
SELECT workspace_id, user_id, operation_id, idem_key, fingerprint, 'executing', lease_until, created_at, lease_until, attempt
FROM idempotency_claims;

DELETE FROM idempotency_claims;
