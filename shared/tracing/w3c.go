package tracing

import (
	"context"
	"math/rand/v2"

	"go.opentelemetry.io/otel/trace"
)

// Header is the W3C Trace Context request header (https://www.w3.org/TR/trace-context/):
// "00-<32 hex trace-id>-<16 hex parent-id>-<2 hex flags>". tracestate is not carried.
const Header = "traceparent"

// keyHeader is Header as http.Header's map key.
const keyHeader = "Traceparent"

// TraceparentLength is the length of a version-00 traceparent value.
const TraceparentLength = 55

// Parse reads a traceparent value. It accepts version 00 exactly as the recommendation
// writes it, and later versions by their version-00 prefix (the recommendation's rule for
// versions it does not know); it refuses version ff, upper-case hex, an all-zero trace or
// parent ID and anything else. The span context is marked remote. It allocates nothing.
func Parse(v string) (trace.SpanContext, bool) {
	if len(v) < TraceparentLength || v[2] != '-' || v[35] != '-' || v[52] != '-' {
		return trace.SpanContext{}, false
	}
	ver, ok := hexByte(v[0], v[1])
	if !ok || ver == 0xff || (ver == 0 && len(v) != TraceparentLength) || (len(v) > TraceparentLength && v[TraceparentLength] != '-') {
		return trace.SpanContext{}, false
	}
	var tid trace.TraceID
	var sid trace.SpanID
	if !decodeHex(tid[:], v[3:35]) || !decodeHex(sid[:], v[36:52]) || !tid.IsValid() || !sid.IsValid() {
		return trace.SpanContext{}, false
	}
	flags, ok := hexByte(v[53], v[54])
	if !ok {
		return trace.SpanContext{}, false
	}
	return trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: tid, SpanID: sid, TraceFlags: trace.TraceFlags(flags) & trace.FlagsSampled, Remote: true,
	}), true
}

// ParseTraceID reads a trace ID in the form traceparent and X-Request-ID carry it: 32
// lower-case hex digits, not all zero.
func ParseTraceID(s string) (trace.TraceID, bool) {
	var tid trace.TraceID
	if len(s) != 32 || !decodeHex(tid[:], s) || !tid.IsValid() {
		return trace.TraceID{}, false
	}
	return tid, true
}

// Format writes a span context as a version-00 traceparent value; "" when it is not valid.
func Format(sc trace.SpanContext) string {
	if !sc.IsValid() {
		return ""
	}
	var b [TraceparentLength]byte
	return string(AppendFormat(b[:0], sc))
}

// AppendFormat appends sc as a version-00 traceparent value.
func AppendFormat(b []byte, sc trace.SpanContext) []byte {
	tid, sid := sc.TraceID(), sc.SpanID()
	b = append(b, '0', '0', '-')
	b = appendHex(b, tid[:])
	b = append(b, '-')
	b = appendHex(b, sid[:])
	b = append(b, '-')
	return appendHex(b, []byte{byte(sc.TraceFlags() & trace.FlagsSampled)})
}

// NewTraceID returns a random trace ID. The bits come from the runtime's per-thread
// generator: unpredictable enough for correlation, never a secret.
func NewTraceID() trace.TraceID {
	var t trace.TraceID
	for !t.IsValid() {
		putUint64(t[:8], rand.Uint64())
		putUint64(t[8:], rand.Uint64())
	}
	return t
}

// NewSpanID returns a random span ID.
func NewSpanID() trace.SpanID {
	var s trace.SpanID
	for !s.IsValid() {
		putUint64(s[:], rand.Uint64())
	}
	return s
}

// Incoming is the trace context of a request received from a peer (router → cell, cell →
// renderer): its valid traceparent, else a trace continued from an X-Request-ID-style
// trace ID (requestID, may be empty) with a fresh parent-less root, else a new trace.
// remote reports a parent taken from traceparent.
func Incoming(h map[string][]string, requestID string) (sc trace.SpanContext, remote bool) {
	if v := h[keyHeader]; len(v) == 1 {
		if sc, ok := Parse(v[0]); ok {
			return sc, true
		}
	}
	tid, ok := ParseTraceID(requestID)
	if !ok {
		tid = NewTraceID()
	}
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: NewSpanID()}), false
}

// Inject sets traceparent on an outgoing request's header from the span in ctx; nothing when
// ctx holds none.
func Inject(ctx context.Context, h map[string][]string) {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		h[keyHeader] = []string{Format(sc)}
	}
}

// TraceID is the hex trace ID of the span in ctx, or "".
func TraceID(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.HasTraceID() {
		return ""
	}
	return sc.TraceID().String()
}

// Traceparent is the traceparent value of the span in ctx, or "".
func Traceparent(ctx context.Context) string { return Format(trace.SpanContextFromContext(ctx)) }

// StoredTraceparent is what a row made for ctx's request (a job, a render request) stores of its
// trace: the traceparent, or nil (SQL NULL) when ctx holds none. WithRemote reads it back.
func StoredTraceparent(ctx context.Context) any {
	if tp := Traceparent(ctx); tp != "" {
		return tp
	}
	return nil
}

// WithRemote returns ctx carrying the span context a traceparent value names (a stored one:
// a job's, a render request's), so that spans started under it are its children and log
// lines carry its trace ID. An empty or invalid value leaves ctx as it is.
func WithRemote(ctx context.Context, traceparent string) context.Context {
	if sc, ok := Parse(traceparent); ok {
		return trace.ContextWithRemoteSpanContext(ctx, sc)
	}
	return ctx
}

const hexDigits = "0123456789abcdef"

func appendHex(b, src []byte) []byte {
	for _, c := range src {
		b = append(b, hexDigits[c>>4], hexDigits[c&0xf])
	}
	return b
}

// decodeHex decodes lower-case hex s into dst (len(s) == 2*len(dst)).
func decodeHex(dst []byte, s string) bool {
	if len(s) != 2*len(dst) {
		return false
	}
	for i := range dst {
		c, ok := hexByte(s[2*i], s[2*i+1])
		if !ok {
			return false
		}
		dst[i] = c
	}
	return true
}

func hexByte(hi, lo byte) (byte, bool) {
	h, ok1 := nibble(hi)
	l, ok2 := nibble(lo)
	return h<<4 | l, ok1 && ok2
}

func nibble(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}

func putUint64(b []byte, v uint64) {
	for i := range 8 {
		b[i] = byte(v >> (56 - 8*i))
	}
}

// TraceIDString is tid in hex (trace.TraceID.String, with one allocation instead of two).
func TraceIDString(tid trace.TraceID) string {
	var b [32]byte
	return string(appendHex(b[:0], tid[:]))
}
