package tracing

import (
	"bufio"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

func TestParseFormat(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	sc, ok := Parse(tp)
	if !ok || !sc.IsRemote() || !sc.IsSampled() || sc.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" || sc.SpanID().String() != "00f067aa0ba902b7" {
		t.Fatalf("Parse(%q) = %v, %v", tp, sc, ok)
	}
	if got := Format(sc); got != tp {
		t.Errorf("Format = %q, want %q", got, tp)
	}
	// A later version is read by its version-00 prefix; unknown flags are dropped.
	if sc, ok := Parse("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-03-whatever"); !ok || Format(sc) != tp {
		t.Errorf("version 01: %v %v", Format(sc), ok)
	}
	for _, bad := range []string{
		"", "00", tp + "-", tp[:54], strings.ToUpper(tp),
		"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g",
		"00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x",
		"00-svc_pat_secretsecretsecretsecret-00f067aa0ba902b7-01",
	} {
		if _, ok := Parse(bad); ok {
			t.Errorf("Parse(%q) accepted it", bad)
		}
	}
	if Format(trace.SpanContext{}) != "" {
		t.Error("Format of an invalid span context is not empty")
	}
	if _, ok := ParseTraceID("4bf92f3577b34da6a3ce929d0e0e4736"); !ok {
		t.Error("ParseTraceID refused a trace ID")
	}
	for _, bad := range []string{"req_123", "00000000000000000000000000000000", "4BF92F3577B34DA6A3CE929D0E0E4736", "4bf92f3577b34da6a3ce929d0e0e473"} {
		if _, ok := ParseTraceID(bad); ok {
			t.Errorf("ParseTraceID(%q) accepted it", bad)
		}
	}
	if a, b := NewTraceID(), NewTraceID(); !a.IsValid() || a == b || TraceIDString(a) != a.String() {
		t.Errorf("NewTraceID: %v %v", a, b)
	}
}

func TestIncoming(t *testing.T) {
	h := http.Header{}
	h.Set(Header, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00")
	if sc, remote := Incoming(h, "ffffffffffffffffffffffffffffffff"); !remote || sc.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Errorf("traceparent not taken: %v %v", sc, remote)
	}
	if sc, remote := Incoming(http.Header{}, "ffffffffffffffffffffffffffffffff"); remote || sc.TraceID().String() != "ffffffffffffffffffffffffffffffff" {
		t.Errorf("X-Request-ID trace not continued: %v %v", sc, remote)
	}
	if sc, remote := Incoming(http.Header{}, "req_abc"); remote || !sc.IsValid() {
		t.Errorf("no new trace: %v %v", sc, remote)
	}
	// Off: Start gives a context a trace (the one asked for, or a new one), and keeps a parent's.
	ctx, span := Start(Extract(context.Background(), http.Header{}, "ffffffffffffffffffffffffffffffff"), "x")
	if span.IsRecording() || TraceID(ctx) != "ffffffffffffffffffffffffffffffff" {
		t.Errorf("off: trace %q, recording %v", TraceID(ctx), span.IsRecording())
	}
	ctx2, _ := Start(WithRemote(context.Background(), Format(trace.SpanContextFromContext(ctx))), "y")
	if TraceID(ctx2) != TraceID(ctx) {
		t.Errorf("stored traceparent not continued: %q", TraceID(ctx2))
	}
	out := http.Header{}
	Inject(ctx, out)
	if sc, ok := Parse(out.Get(Header)); !ok || sc.TraceID().String() != TraceID(ctx) {
		t.Errorf("Inject wrote %q", out.Get(Header))
	}
}

func TestSetupRejectsUnknownSettings(t *testing.T) {
	for _, env := range []map[string]string{
		{"OTEL_TRACES_EXPORTER": "jaeger"},
		{"OTEL_TRACES_EXPORTER": "file"},
		{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
		{"TRACES_WORKSPACE_ATTRIBUTE": "maybe"},
	} {
		if _, err := Setup(context.Background(), "test", func(k string) string { return env[k] }); err == nil {
			t.Errorf("%v accepted", env)
		}
	}
	stop, err := Setup(context.Background(), "test", func(k string) string { return "" })
	if err != nil || Enabled() {
		t.Fatalf("default: err %v, enabled %v: want off", err, Enabled())
	}
	_ = stop(context.Background())
	stop, err = Setup(context.Background(), "test", func(k string) string {
		return map[string]string{"OTEL_TRACES_EXPORTER": "file", "TRACES_FILE": "/nonexistent/x", "OTEL_SDK_DISABLED": "true"}[k]
	})
	if err != nil || Enabled() {
		t.Fatalf("OTEL_SDK_DISABLED: err %v, enabled %v", err, Enabled())
	}
	_ = stop(context.Background())
}

// TestFileExport writes spans to TRACES_FILE and reads them back: the child continues the
// parent's trace, attributes are redacted, the workspace is hashed when asked.
func TestFileExport(t *testing.T) {
	path := filepath.Join(t.TempDir(), "spans.jsonl")
	env := map[string]string{"OTEL_TRACES_EXPORTER": "none,file", "TRACES_FILE": path, "TRACES_WORKSPACE_ATTRIBUTE": "hash"}
	stop, err := Setup(context.Background(), "test", func(k string) string { return env[k] })
	if err != nil || !Enabled() {
		t.Fatalf("Setup: %v, enabled %v", err, Enabled())
	}
	ctx := Extract(context.Background(), http.Header{"Traceparent": {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}, "")
	ctx, parent := Start(ctx, "parent")
	_, child := Start(WithRemote(context.Background(), Traceparent(ctx)), "child")
	child.SetAttributes(Str("note", "GET /x?token=svc_pat_topsecret"), Workspace("ws_abcdefghijklmnopqrstuvwxyz"),
		attribute.String("raw", "Authorization: Bearer rawsecretvalue"))
	child.AddEvent("sig=eventsecret")
	End(child, "RENDER_TIMEOUT", true)
	End(parent, "", false)
	// Rooted on an X-Request-ID's trace.
	_, root := Start(Extract(context.Background(), http.Header{}, "ffffffffffffffffffffffffffffffff"), "root")
	End(root, "ok", false)
	if err := stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if Enabled() {
		t.Fatal("still enabled after shutdown")
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if len(lines) != 3 {
		t.Fatalf("%d span lines, want 3:\n%s", len(lines), strings.Join(lines, "\n"))
	}
	all := strings.Join(lines, "\n")
	for _, want := range []string{`"Name":"child"`, `"Name":"parent"`, `"TraceID":"4bf92f3577b34da6a3ce929d0e0e4736"`,
		`"TraceID":"ffffffffffffffffffffffffffffffff"`, `"SpanID":"00f067aa0ba902b7"`, "RENDER_TIMEOUT", `"slidecells.outcome"`, `"service.name"`} {
		if !strings.Contains(all, want) {
			t.Errorf("spans lack %s:\n%s", want, all)
		}
	}
	for _, never := range []string{"svc_pat_topsecret", "ws_abcdefghijklmnopqrstuvwxyz", "rawsecretvalue", "eventsecret"} {
		if strings.Contains(all, never) {
			t.Errorf("spans hold %s", never)
		}
	}
	if strings.Count(all, "4bf92f3577b34da6a3ce929d0e0e4736") < 3 {
		t.Errorf("the child is not in the parent's trace:\n%s", all)
	}
}
