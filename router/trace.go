package router

import (
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"slidecells/shared/tracing"
)

// startTrace takes the request's trace (shared/tracing): the client's traceparent when it is
// valid, else the trace ID a client's X-Request-ID names when it has that form (32 lower-case
// hex digits: a client sending back the X-Request-ID it was given), else a new trace. Its ID
// in hex is the request ID: X-Request-ID to the cell and to the client, trace_id of the logs
// and of problem bodies.
//
// With tracing off this costs one string (the ID) and, for a client's traceparent, one more
// (the traceparent sent on, the client's span staying the cell's parent); nothing touches a
// context. With tracing on the router's own span is the cell's parent.
func (x *exchange) startTrace() {
	h := x.r.Header
	var sc trace.SpanContext
	if v := h[keyTraceparent]; len(v) == 1 {
		sc, _ = tracing.Parse(v[0])
	}
	var tid trace.TraceID
	if sc.IsValid() {
		tid = sc.TraceID()
	} else {
		var ok bool
		if v := h[keyRequestID]; len(v) == 1 {
			tid, ok = tracing.ParseTraceID(v[0])
		}
		if !ok {
			tid = tracing.NewTraceID()
		}
	}
	if tracing.Enabled() {
		ctx := x.r.Context()
		if sc.IsValid() {
			ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
		} else {
			ctx = tracing.WithTraceID(ctx, tid)
		}
		_, x.span = tracing.Start(ctx, "router.request", trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(attribute.String("http.request.method", x.r.Method)))
		sc = x.span.SpanContext()
	}
	x.reqID = tracing.TraceIDString(tid)
	if sc.IsValid() {
		x.trace = tracing.Format(sc)
	}
}

// endSpan ends the router's span with the request's outcome.
func (x *exchange) endSpan(status int) {
	x.span.SetAttributes(attribute.Int("http.response.status_code", status),
		tracing.Str(tracing.AttrCell, x.cellID()), tracing.Workspace(x.ws))
	outcome := "ok"
	if status >= 500 {
		outcome = "status_" + strconv.Itoa(status)
	}
	tracing.End(x.span, outcome, status >= 500)
}
