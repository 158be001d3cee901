package cellproto

import (
	"strings"
	"testing"

	"slidecells/shared/ids"
)

func TestRequestID(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, in string
		kept     bool
	}{
		{"plain", "client-trace.1", true},
		{"our own", ids.New(ids.Request), true},
		{"underscore", "a_b", true},
		{"one character", "x", true},
		{"64 characters", strings.Repeat("a", 64), true},
		{"empty", "", false},
		{"65 characters", strings.Repeat("a", 65), false},
		{"space", "bad id", false},
		{"newline", "a\nX-Injected: 1", false},
		{"non-ASCII", "trace-é", false},
		{"slash", "a/b", false},
		{"token", "svc_pat_abcdefghijklmnop", false},
		{"token in upper case", "SVC_PAT_X", false},
		{"token inside", "trace-svc_dlg_x", false},
		{"token after a dash", "x-SVC_pat_1", false},
		{"semicolon", "semi;colon", false},
		{"CRLF", "a\r\nX-Evil: 1", false},
		{"svc without underscore", "svc-trace", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := RequestID(tc.in)
			if tc.kept {
				if got != tc.in {
					t.Fatalf("RequestID(%q) = %q, want it kept", tc.in, got)
				}
				return
			}
			if got == tc.in || !ids.Valid(ids.Request, got) || !ValidRequestID(got) {
				t.Fatalf("RequestID(%q) = %q, want a fresh req_ ID", tc.in, got)
			}
		})
	}
	if first, second := RequestID(""), RequestID(""); first == second {
		t.Error("two fresh request IDs are equal")
	}
}
