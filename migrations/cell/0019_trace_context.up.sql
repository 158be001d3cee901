-- One trace per request across processes (shared/tracing, docs/tracing.md): a job and a render
-- request keep the W3C traceparent of the request that created them, so the job's runs and the
-- render's attempts (in whichever replica, on whichever renderer) are spans of that trace and
-- their log lines carry its trace_id. NULL for rows made before this migration or without a
-- trace; at most 55 characters (version 00), checked by the writer.
ALTER TABLE mutation_jobs ADD COLUMN traceparent TEXT NULL;
ALTER TABLE render_requests ADD COLUMN traceparent TEXT NULL;
