package tracing

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"slidecells/shared/logging"
)

// redactingExporter passes every span through logging.Redact before its exporter sees it: the
// second line of defence, as the redacting core is for logs. This project's attributes are
// redacted when set (Str); spans of libraries that use the global provider (gocloud.dev/blob
// records error messages) are redacted here.
type redactingExporter struct{ sdktrace.SpanExporter }

func (e redactingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	out := make([]sdktrace.ReadOnlySpan, len(spans))
	for i, s := range spans {
		st := tracetest.SpanStubFromReadOnlySpan(s)
		st.Name = logging.Redact(st.Name)
		st.Attributes = redactAttrs(st.Attributes)
		st.Status.Description = logging.Redact(st.Status.Description)
		for j := range st.Events {
			st.Events[j].Name = logging.Redact(st.Events[j].Name)
			st.Events[j].Attributes = redactAttrs(st.Events[j].Attributes)
		}
		out[i] = st.Snapshot()
	}
	return e.SpanExporter.ExportSpans(ctx, out)
}

func redactAttrs(in []attribute.KeyValue) []attribute.KeyValue {
	var out []attribute.KeyValue
	for i, kv := range in {
		if kv.Value.Type() != attribute.STRING {
			continue
		}
		if r := logging.Redact(kv.Value.AsString()); r != kv.Value.AsString() {
			if out == nil {
				out = append([]attribute.KeyValue(nil), in...)
			}
			out[i] = attribute.String(string(kv.Key), r)
		}
	}
	if out == nil {
		return in
	}
	return out
}
