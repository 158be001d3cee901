ALTER TABLE idempotency_keys DROP COLUMN attempt;
