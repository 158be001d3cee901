DROP TABLE idempotency_claims;
