package logging

import (
	"context"

	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
)

// TraceKey is the field every process logs a request's trace ID under: the W3C trace ID (32
// hex digits) that is also the X-Request-ID and the problem body's trace_id the client sees.
const TraceKey = "trace_id"

// Trace is the trace_id field of the span context in ctx (see shared/tracing), or a field
// that writes nothing when ctx holds none.
func Trace(ctx context.Context) zap.Field {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.HasTraceID() {
		return zap.Skip()
	}
	return zap.String(TraceKey, sc.TraceID().String())
}
