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
	if got := Redact("plain message"); got != "plain message" {
		t.Errorf("Redact changed a clean string: %q", got)
	}
}
