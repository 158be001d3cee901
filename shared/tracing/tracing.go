// Package tracing carries one trace per request across the processes of a cell-based
// deployment (router → cell → job worker → render coordinator → renderer → preview host) and,
// when configured, exports spans with OpenTelemetry's SDK.
//
// Two layers:
//
//   - Propagation, always on: W3C traceparent values are parsed, formatted and generated here
//     by hand (no allocation on the router's hot path), stored with jobs and render requests,
//     and put into contexts as OpenTelemetry span contexts, so every log line can carry the
//     request's trace_id (logging.Trace) whether spans are exported or not.
//   - Export, off by default: Setup reads the standard OTEL_* variables. OTEL_TRACES_EXPORTER
//     names the exporters ("none" by default; "otlp" for OTLP over HTTP/protobuf, configured by
//     OTEL_EXPORTER_OTLP_*; "console" for JSON lines on standard output; "file", this project's,
//     for JSON lines appended to the file TRACES_FILE names). OTEL_SDK_DISABLED=true switches
//     it off, OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES name the process,
//     OTEL_TRACES_SAMPLER(_ARG) and OTEL_BSP_* are the SDK's own.
//
// Span attributes never hold a token, ticket, signed URL or Authorization value: Str redacts
// every string value it is given (logging.Redact), no span records a URL's query, and every
// exporter sees spans (also those of libraries, such as gocloud.dev/blob's) only after their
// names, string attributes, status and events went through logging.Redact again. The
// workspace is an attribute (slidecells.workspace_id) that TRACES_WORKSPACE_ATTRIBUTE can turn
// into a hash ("hash") or drop ("drop").
package tracing

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"slidecells/shared/logging"
)

// Attribute keys of this project's spans.
const (
	AttrWorkspace = "slidecells.workspace_id"
	AttrCell      = "slidecells.cell"
	AttrOutcome   = "slidecells.outcome"
	AttrOperation = "slidecells.operation"
)

// state is what Setup installed; nil while tracing is off.
type state struct {
	tracer    trace.Tracer
	workspace string // plain, hash or drop
}

var current atomic.Pointer[state]

// Enabled reports whether spans are recorded and exported (Setup found an exporter).
func Enabled() bool { return current.Load() != nil }

// Getenv reads a setting; tests replace it with a map's lookup.
type Getenv func(string) string

// Setup configures export from the environment (see the package comment) for one process,
// named service unless OTEL_SERVICE_NAME says otherwise, with resourceAttrs on every span
// (the cell's ID in a cell). It returns the function that flushes
// and stops export (call it before exiting; it is never nil). With no exporter configured it
// installs nothing and spans stay unrecorded, their IDs still propagated.
func Setup(ctx context.Context, service string, getenv Getenv, resourceAttrs ...attribute.KeyValue) (func(context.Context) error, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	none := func(context.Context) error { return nil }
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return none, nil
	}
	wsMode := strings.TrimSpace(getenv("TRACES_WORKSPACE_ATTRIBUTE"))
	switch wsMode {
	case "":
		wsMode = "plain"
	case "plain", "hash", "drop":
	default:
		return none, fmt.Errorf("TRACES_WORKSPACE_ATTRIBUTE: %q is not one of plain, hash, drop", wsMode)
	}
	var opts []sdktrace.TracerProviderOption
	var closers []func() error
	fail := func(err error) (func(context.Context) error, error) {
		for _, c := range closers {
			_ = c()
		}
		return none, err
	}
	names := getenv("OTEL_TRACES_EXPORTER")
	seen := map[string]bool{}
	for name := range strings.SplitSeq(names, ",") {
		name = strings.TrimSpace(name)
		if name == "" || name == "none" || seen[name] {
			continue
		}
		seen[name] = true
		switch name {
		case "otlp":
			proto := getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
			if proto == "" {
				proto = getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
			}
			if proto != "" && proto != "http/protobuf" {
				return fail(fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL: %q is not supported; use http/protobuf", proto))
			}
			exp, err := otlptracehttp.New(ctx)
			if err != nil {
				return fail(fmt.Errorf("OTLP trace exporter: %w", err))
			}
			opts = append(opts, sdktrace.WithBatcher(redactingExporter{exp}))
		case "console":
			exp, err := stdouttrace.New(stdouttrace.WithWriter(os.Stdout))
			if err != nil {
				return fail(err)
			}
			opts = append(opts, sdktrace.WithSyncer(redactingExporter{exp}))
		case "file":
			path := getenv("TRACES_FILE")
			if path == "" {
				return fail(errors.New("OTEL_TRACES_EXPORTER=file needs TRACES_FILE (the file spans are appended to)"))
			}
			f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
			if err != nil {
				return fail(fmt.Errorf("TRACES_FILE: %w", err))
			}
			closers = append(closers, f.Close)
			exp, err := stdouttrace.New(stdouttrace.WithWriter(f))
			if err != nil {
				return fail(err)
			}
			// Synchronous: a development exporter whose file a test or an operator reads at once.
			opts = append(opts, sdktrace.WithSyncer(redactingExporter{exp}))
		default:
			return fail(fmt.Errorf("OTEL_TRACES_EXPORTER: %q is not one of none, otlp, console, file", name))
		}
	}
	if len(opts) == 0 {
		return none, nil
	}
	// The SDK's own detector reads OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES from the
	// process environment; a Getenv given by a test only names the default.
	res, err := resource.New(ctx, resource.WithAttributes(append([]attribute.KeyValue{attribute.String("service.name", service)}, resourceAttrs...)...),
		resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil && res == nil {
		return fail(fmt.Errorf("trace resource: %w", err))
	}
	tp := sdktrace.NewTracerProvider(append(opts, sdktrace.WithResource(res), sdktrace.WithIDGenerator(idGenerator{}))...)
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	current.Store(&state{tracer: tp.Tracer("slidecells/" + service), workspace: wsMode})
	return func(ctx context.Context) error {
		current.Store(nil)
		err := tp.Shutdown(ctx)
		for _, c := range closers {
			err = errors.Join(err, c())
		}
		return err
	}, nil
}

// Start starts a span named name under the span or remote span context in ctx. With export
// off it records nothing: ctx keeps its span context, or gets a new root one when it has none,
// so IDs still propagate and log lines still carry a trace_id.
func Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	if st := current.Load(); st != nil {
		return st.tracer.Start(ctx, name, opts...)
	}
	if !trace.SpanContextFromContext(ctx).IsValid() {
		tid, _ := idGenerator{}.NewIDs(ctx)
		ctx = trace.ContextWithSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: NewSpanID()}))
	}
	return ctx, trace.SpanFromContext(ctx)
}

// End ends a span with its outcome: "ok" (or ""), or an error code (RENDER_TIMEOUT,
// NOT_FOUND, …); failed marks the span as an error (the server's fault, not the caller's).
func End(span trace.Span, outcome string, failed bool) {
	if !span.IsRecording() {
		span.End()
		return
	}
	if outcome == "" {
		outcome = "ok"
	}
	span.SetAttributes(attribute.String(AttrOutcome, logging.Redact(outcome)))
	if failed {
		span.SetStatus(codes.Error, logging.Redact(outcome))
	}
	span.End()
}

// Str is a string attribute, redacted like a log field.
func Str(key, value string) attribute.KeyValue {
	return attribute.String(key, logging.Redact(value))
}

// Workspace is the workspace attribute as TRACES_WORKSPACE_ATTRIBUTE asks: the ID, its hash
// (the first 16 hex digits of its SHA-256), or nothing (an empty key, which the SDK drops).
func Workspace(ws string) attribute.KeyValue {
	st := current.Load()
	if st == nil || ws == "" || st.workspace == "drop" {
		return attribute.KeyValue{}
	}
	if st.workspace == "hash" {
		sum := sha256.Sum256([]byte(ws))
		return attribute.String(AttrWorkspace, hex.EncodeToString(sum[:8]))
	}
	return Str(AttrWorkspace, ws)
}

type wantKey struct{}

// WithTraceID returns ctx asking the next root span started under it (one with no parent) to
// use trace ID tid: a trace continued from an X-Request-ID, not from a traceparent.
func WithTraceID(ctx context.Context, tid trace.TraceID) context.Context {
	return context.WithValue(ctx, wantKey{}, tid)
}

// Extract returns ctx under the trace of an incoming request (see Incoming): the remote parent
// its traceparent names, or a root to come under the trace ID its X-Request-ID (requestID)
// names, or a new trace.
func Extract(ctx context.Context, h map[string][]string, requestID string) context.Context {
	sc, remote := Incoming(h, requestID)
	if remote {
		return trace.ContextWithRemoteSpanContext(ctx, sc)
	}
	return WithTraceID(ctx, sc.TraceID())
}

// idGenerator is the SDK's ID source: random, but a root span takes the trace ID WithTraceID
// put in its context.
type idGenerator struct{}

func (idGenerator) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	if tid, ok := ctx.Value(wantKey{}).(trace.TraceID); ok && tid.IsValid() {
		return tid, NewSpanID()
	}
	return NewTraceID(), NewSpanID()
}

func (idGenerator) NewSpanID(context.Context, trace.TraceID) trace.SpanID { return NewSpanID() }
