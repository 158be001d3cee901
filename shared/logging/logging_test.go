package logging

import (
	"strings"
	"testing"
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
