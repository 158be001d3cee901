package api

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"slidecells/shared/cellproto"
	"slidecells/shared/tracing"
)

// startSpan puts the request under its trace (shared/tracing): the router's traceparent, else
// the trace ID its X-Request-ID names, else a new one; its hex ID is the request's trace ID
// (TraceID, X-Request-ID, problem bodies, log lines). The span is named after the operation
// once the pipeline knows it (endSpan).
func (s *Server) startSpan(ctx context.Context, r *http.Request) (context.Context, trace.Span) {
	ctx = tracing.Extract(ctx, r.Header, r.Header.Get(cellproto.HeaderRequestID))
	return tracing.Start(ctx, "cell.request", trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("http.request.method", r.Method), tracing.Str(tracing.AttrCell, s.CellID)))
}

// endSpan names the span after the operation and ends it with the request's outcome (the
// error code, or "ok").
func (s *Server) endSpan(span trace.Span, out *outcome, status int, ws string) {
	if !span.IsRecording() {
		return
	}
	if out.op != unknownOperation {
		span.SetName("cell." + out.op)
	}
	span.SetAttributes(tracing.Str(tracing.AttrOperation, out.op), attribute.Int("http.response.status_code", status),
		tracing.Workspace(ws))
	outcome := string(out.code)
	if status < 400 {
		outcome = "ok"
	} else if outcome == "" {
		outcome = http.StatusText(status)
	}
	tracing.End(span, outcome, status >= 500)
}
