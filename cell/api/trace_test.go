package api_test

import (
	"encoding/json"
	"testing"

	"slidecells/shared/problem"
	"slidecells/shared/tracing"
)

// TestRequestTrace: the cell takes the request's trace from the router's traceparent (else an
// X-Request-ID that is a trace ID, else a new one) and answers with it in X-Request-ID and a
// problem body's trace_id.
func TestRequestTrace(t *testing.T) {
	b := setup(t)
	const tid = "4bf92f3577b34da6a3ce929d0e0e4736"
	for _, c := range []struct {
		name   string
		header []string
		want   string
	}{
		{"traceparent", []string{"traceparent", "00-" + tid + "-00f067aa0ba902b7-01", "X-Request-ID", "ffffffffffffffffffffffffffffffff"}, tid},
		{"X-Request-ID", []string{"X-Request-ID", tid}, tid},
		{"neither", []string{"X-Request-ID", "req_old", "traceparent", "00-" + tid + "-0000000000000000-01"}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp, body := b.call(t, call{method: "GET", path: "/api/v1/projects/prj_x", ws: b.ws, header: c.header})
			var p problem.Body
			_ = json.Unmarshal(body, &p)
			got := resp.Header.Get("X-Request-ID")
			if _, ok := tracing.ParseTraceID(got); !ok || p.TraceID != got || (c.want != "" && got != c.want) || (c.want == "" && got == tid) {
				t.Fatalf("X-Request-ID %q, trace_id %q, want %q (a new trace when empty)", got, p.TraceID, c.want)
			}
		})
	}
}
