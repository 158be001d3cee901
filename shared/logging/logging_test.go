package logging

import (
	"bytes"
	"encoding/json"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
)

func TestRedact(t *testing.T) {
	cases := []struct{ in, mustNot string }{
		{"token svc_pat_abcDEF123_xyz used", "svc_pat_abcDEF123"},
		{"Authorization: Bearer abc.def-ghi", "abc.def-ghi"},
		{"GET /x?sig=deadbeef&a=1", "deadbeef"},
		{`{"ticket=eyJ0.abc"}`, "eyJ0.abc"},
	}
	for _, c := range cases {
		got := Redact(c.in)
		if strings.Contains(got, c.mustNot) {
			t.Errorf("Redact(%q) = %q still holds %q", c.in, got, c.mustNot)
		}
		if !strings.Contains(got, "[REDACTED]") {
			t.Errorf("Redact(%q) = %q has no marker", c.in, got)
		}
	}
	for _, clean := range []string{"plain message", "ws_abcdefghijklmnopqrstuvwxyz", "/api/v1/workspaces/ws_x/capabilities", "req_123"} {
		if got := Redact(clean); got != clean {
			t.Errorf("Redact changed a clean string: %q", got)
		}
	}
	for _, dirty := range []string{"SVC_PAT_ABC", "BEARER abc", "x?Sig=1"} {
		if got := Redact(dirty); got == dirty {
			t.Errorf("Redact missed %q", dirty)
		}
	}
}

func BenchmarkRedactCleanID(b *testing.B) {
	for i := 0; i < b.N; i++ {
		_ = Redact("/api/v1/workspaces/ws_abcdefghijklmnopqrstuvwxyz")
	}
}

func TestAccessLogLooksLikeTheLogger(t *testing.T) {
	var buf bytes.Buffer
	log, access, err := NewWithAccess("router", Options{Output: &buf})
	if err != nil {
		t.Fatal(err)
	}
	// 5895128470 ns is a duration whose d.Seconds() differs from zap's in the last digit.
	log.Info("request", zap.String("method", "GET"), zap.String("path", "/a\"b\\c\n\x01é\xff"),
		zap.Int("status", 200), zap.Duration("duration", 1500*time.Microsecond),
		zap.Duration("slow", 5895128470*time.Nanosecond))
	access.Begin("request").Str("method", "GET").Str("path", "/a\"b\\c\n\x01é\xff").
		Int("status", 200).Dur("duration", 1500*time.Microsecond).Dur("slow", 5895128470*time.Nanosecond).End()
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("want 2 lines, got %q", buf.String())
	}
	// Identical apart from the timestamp's value.
	ts := regexp.MustCompile(`"ts":"[^"]*"`)
	z, a := ts.ReplaceAllString(lines[0], `"ts":""`), ts.ReplaceAllString(lines[1], `"ts":""`)
	if z != a {
		t.Errorf("access line differs from the logger's:\nzap:    %s\naccess: %s", z, a)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(lines[1]), &m); err != nil {
		t.Fatalf("not JSON: %v: %s", err, lines[1])
	}
	if _, err := time.Parse(isoLayout, m["ts"].(string)); err != nil {
		t.Errorf("ts: %v", err)
	}
}

// TestAccessLogBeginAtStampsTheGivenTime: BeginAt writes the time it is given, as zap's
// encoder would, in the zone of that time.
func TestAccessLogBeginAtStampsTheGivenTime(t *testing.T) {
	var buf bytes.Buffer
	_, access, err := NewWithAccess("router", Options{Output: &buf})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2030, 1, 2, 3, 4, 5, 678_900_000, time.FixedZone("X", 2*3600))
	access.BeginAt("request", at).Str("method", "GET").End()
	// A second line in the same second reuses the formatted second: it must not leak into a
	// line of another second.
	later := at.Add(2*time.Second + 100*time.Millisecond)
	access.BeginAt("request", later).End()
	want := []string{`"ts":"2030-01-02T03:04:05.678+0200"`, `"ts":"2030-01-02T03:04:07.778+0200"`}
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("want 2 lines, got %q", buf.String())
	}
	for i, w := range want {
		if !strings.Contains(lines[i], w) {
			t.Errorf("line %d: %s, want %s", i, lines[i], w)
		}
	}
}

func TestAccessLogRedactsAndHonoursTheLevel(t *testing.T) {
	var buf bytes.Buffer
	_, access, err := NewWithAccess("router", Options{Output: &buf})
	if err != nil {
		t.Fatal(err)
	}
	access.Begin("request").Str("path", "/x?token=svc_pat_secretvalue123").Str("ua", "Bearer abc.def").End()
	if s := buf.String(); strings.Contains(s, "secretvalue") || strings.Contains(s, "abc.def") || !strings.Contains(s, "[REDACTED]") {
		t.Errorf("not redacted: %s", s)
	}

	t.Setenv("LOG_LEVEL", "warn")
	buf.Reset()
	_, quiet, err := NewWithAccess("router", Options{Output: &buf})
	if err != nil {
		t.Fatal(err)
	}
	if quiet.Enabled() {
		t.Error("enabled at LOG_LEVEL=warn")
	}
	quiet.Begin("request").Str("a", "b").Int("c", 1).Dur("d", time.Second).End()
	var none *AccessLog
	none.Begin("request").Str("a", "b").End()
	if buf.Len() != 0 {
		t.Errorf("wrote %q while disabled", buf.String())
	}
}

func TestAccessLogSharesTheLoggerBuffer(t *testing.T) {
	var buf bytes.Buffer
	log, access, err := NewWithAccess("router", Options{Output: &buf, Buffered: true})
	if err != nil {
		t.Fatal(err)
	}
	log.Info("first")
	access.Begin("second").End()
	if buf.Len() != 0 {
		t.Fatalf("buffered output written early: %q", buf.String())
	}
	_ = log.Sync()
	if s := buf.String(); !strings.Contains(s, `"msg":"first"`) || !strings.Contains(s, `"msg":"second"`) {
		t.Errorf("Sync did not flush both: %q", s)
	}
}

func BenchmarkAccessLine(b *testing.B) {
	log, access, err := NewWithAccess("router", Options{Output: io.Discard})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("zap", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if ce := log.Check(zap.InfoLevel, "request"); ce != nil {
				ce.Write(zap.String("method", "GET"), zap.String("path", "/api/v1/workspaces/ws_abcdefghijklmnopqrstuvwxyz"),
					zap.Int("status", 200), zap.String("cell", "cell-a"), zap.String("workspace_id", "ws_abcdefghijklmnopqrstuvwxyz"),
					zap.String("trace_id", "req_abcdefghijklmnopqrstuvwxyz"), zap.Duration("duration", 1234*time.Microsecond))
			}
		}
	})
	b.Run("access", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			access.Begin("request").Str("method", "GET").Str("path", "/api/v1/workspaces/ws_abcdefghijklmnopqrstuvwxyz").
				Int("status", 200).Str("cell", "cell-a").Str("workspace_id", "ws_abcdefghijklmnopqrstuvwxyz").
				Str("trace_id", "req_abcdefghijklmnopqrstuvwxyz").Dur("duration", 1234*time.Microsecond).End()
		}
	})
}

// syncCounter is an output that counts Sync calls (an *os.File's Sync is an fsync).
type syncCounter struct {
	bytes.Buffer
	syncs int
}

func (s *syncCounter) Sync() error { s.syncs++; return nil }

// A buffered log's flushes write its lines to the output but never sync it: zap's buffered
// syncer syncs at every flush, once a second, under the lock every line waits for, and an
// output that is a file would make every request wait for an fsync.
func TestBufferedFlushWritesWithoutSyncing(t *testing.T) {
	out := &syncCounter{}
	log, access, err := NewWithAccess("router", Options{Output: out, Buffered: true})
	if err != nil {
		t.Fatal(err)
	}
	access.Begin("request").Str("method", "GET").End()
	if out.Len() != 0 {
		t.Fatalf("a buffered line was written at once: %q", out.String())
	}
	if err := log.Sync(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), `"method":"GET"`) {
		t.Errorf("Sync did not write the buffered line: %q", out.String())
	}
	if out.syncs != 0 {
		t.Errorf("the output was synced %d times, want 0", out.syncs)
	}
}
