package renderer

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	rc "slidecells/shared/rendercontract"
	"slidecells/shared/tracing"
)

// attemptTraceparent is the trace context the coordinator sent with an execution request (its
// traceparent header), kept only when it names the request's own trace_id: the attempt's log
// lines carry trace_id from the body, and its span and the preview document request (the
// browser sends it there with the access token) join that trace as children of the
// coordinator's span. "" when absent, invalid or of another trace.
func attemptTraceparent(r *http.Request, req *rc.ExecutionRequest) string {
	sc, ok := tracing.Parse(r.Header.Get(tracing.Header))
	if !ok || sc.TraceID().String() != req.TraceID {
		return ""
	}
	return tracing.Format(sc)
}

// traceRun starts the span of one attempt's run ("renderer.execution") and returns what ends
// it with the attempt's outcome. With tracing off it records nothing.
func (s *Server) traceRun(a *attempt) func() {
	if !tracing.Enabled() {
		return func() {}
	}
	ctx := tracing.WithRemote(context.Background(), a.traceparent)
	if a.traceparent == "" {
		if tid, ok := tracing.ParseTraceID(a.req.TraceID); ok {
			ctx = tracing.WithTraceID(ctx, tid)
		}
	}
	_, span := tracing.Start(ctx, "renderer.execution", trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(tracing.Workspace(a.req.WorkspaceID), attribute.String(tracing.AttrOperation, string(a.req.Operation)),
			attribute.String("slidecells.render_request_id", a.req.RequestID), attribute.String("slidecells.attempt_id", a.req.AttemptID),
			attribute.String("slidecells.renderer", s.cfg.WorkerID)))
	if a.traceparent != "" {
		// The browser's document request is this span's child.
		a.traceparent = tracing.Format(span.SpanContext())
	}
	return func() {
		s.mu.Lock()
		outcome, e := string(a.receipt.Outcome), a.receipt.Error
		s.mu.Unlock()
		code := outcome
		if e != nil {
			code = string(e.Code)
		}
		tracing.End(span, code, e != nil && (e.Category == rc.CategoryInfrastructure || e.Category == rc.CategoryInternal))
	}
}
