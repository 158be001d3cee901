package preview

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"slidecells/shared/tracing"
)

// traceRequest puts a request under the trace its traceparent names: the renderer's browser
// sends one with the preview document request of an attempt (never with subresources, never
// visible to page scripts), and the router with every public preview request. The access log
// line then carries that trace_id; a request without one is logged without. With tracing on a
// span "preview.request" is its child (names the path's kind only: paths hold snapshot
// references, never tokens, but queries may).
func traceRequest(r *http.Request) (context.Context, trace.Span) {
	ctx := r.Context()
	sc, ok := tracing.Parse(r.Header.Get(tracing.Header))
	if !ok {
		return ctx, trace.SpanFromContext(ctx)
	}
	ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
	if !tracing.Enabled() {
		return ctx, trace.SpanFromContext(ctx)
	}
	return tracing.Start(ctx, "preview.request", trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("http.request.method", r.Method)))
}

func endRequestSpan(span trace.Span, status int) {
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(attribute.Int("http.response.status_code", status))
	outcome := "ok"
	if status >= 400 {
		outcome = http.StatusText(status)
	}
	tracing.End(span, outcome, status >= 500)
}
