package render

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"slidecells/shared/tracing"
)

// A render request keeps the traceparent of the request (or job run) that submitted it
// (render_requests.traceparent, migration 0019): every attempt of it, driven by whichever
// replica, is a span of that trace, and the renderer is told the trace (the execution
// request's trace_id and a traceparent header on every control call of the attempt), so the
// renderer's and the preview host's log lines of the attempt carry the caller's trace_id.

// traceAttempt puts the driving of one attempt under its request's trace: a span
// "render.attempt", child of the submitter's span (a request stored without a trace gets a
// trace of its own).
func (c *Coordinator) traceAttempt(ctx context.Context, a *attempt) (context.Context, trace.Span) {
	return tracing.Start(tracing.WithRemote(ctx, a.req.traceparent), "render.attempt", trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(tracing.Workspace(a.req.WorkspaceID), attribute.String(tracing.AttrOperation, string(a.req.Operation)),
			attribute.String("slidecells.render_request_id", a.req.ID), attribute.String("slidecells.attempt_id", a.attemptID),
			attribute.String("slidecells.renderer", a.workerID)))
}

// endAttemptSpan ends the span with the attempt's last state as this driver saw it.
func endAttemptSpan(span trace.Span, a *attempt) {
	tracing.End(span, a.state, a.state == "unknown")
}

// executionTraceID is the trace_id of the attempt's execution request: the trace of ctx
// (traceAttempt), else the render request's ID as before traces were stored.
func executionTraceID(ctx context.Context, a *attempt) string {
	if id := tracing.TraceID(ctx); id != "" {
		return id
	}
	return a.req.ID
}
