ALTER TABLE render_requests DROP COLUMN traceparent;
ALTER TABLE mutation_jobs DROP COLUMN traceparent;
