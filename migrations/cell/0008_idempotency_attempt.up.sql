-- Each execution of an idempotency record gets its own attempt token, so an execution whose
-- lease was taken over can neither complete nor release the record of its successor.
ALTER TABLE idempotency_keys ADD COLUMN attempt TEXT NOT NULL DEFAULT '';
