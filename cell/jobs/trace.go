package jobs

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"slidecells/shared/tracing"
)

// traceRun puts one run of a job under the trace of the request that submitted it: a span
// "job.<kind>", child of that request's span, in whichever replica claims it (a job made before
// trace contexts were stored gets a trace of its own). Log lines of the run carry its trace_id
// (logging.Trace).
func traceRun(ctx context.Context, j Job) (context.Context, trace.Span) {
	return tracing.Start(tracing.WithRemote(ctx, j.Traceparent), "job."+j.Kind, trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(tracing.Workspace(j.WorkspaceID), attribute.String("slidecells.job_id", j.ID),
			attribute.Int("slidecells.job_attempt", j.AttemptCount+1)))
}

// endRun ends a run's span with how the run ended: succeeded, canceled, failed:<code> (also
// when a retry follows), lease_lost, requeued (a moving workspace) or shutdown.
func endRun(span trace.Span, outcome string) {
	tracing.End(span, outcome, outcome != Succeeded && outcome != Canceled && outcome != "requeued")
}
