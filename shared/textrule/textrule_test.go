package textrule

import (
	"strings"
	"testing"
)

func TestName(t *testing.T) {
	for _, c := range []struct{ in, want, msg string }{
		{"Quarterly review", "Quarterly review", ""},
		{"Cafe\u0301", "Caf\u00e9", ""}, // NFC
		{"日本語のタイトル 🎉", "日本語のタイトル 🎉", ""},
		{"a\r\n<script>", "", "control"},
		{"a\tb", "", "control"},
		{"evil\u202Etxt.exe", "", "bidirectional"},
		{"a\u2066b\u2069", "", "bidirectional"},
		{"in\u200Bvisible", "", "zero-width"},
		{"bom\uFEFF", "", "zero-width"},
		{"soft\u00ADhyphen", "", "format"},
		{"line\u2028sep", "", "separator"},
		{"bad\xffutf8", "", "UTF-8"},
		{"non\uFFFE", "", "noncharacter"},
	} {
		got, msg := Name(c.in)
		if c.msg == "" && (msg != "" || got != c.want) {
			t.Errorf("%q: %q %q", c.in, got, msg)
		}
		if c.msg != "" && !strings.Contains(msg, c.msg) {
			t.Errorf("%q: message %q, want %q", c.in, msg, c.msg)
		}
	}
	// Length counts characters of the normalized text.
	if _, msg := NameLen(strings.Repeat("e\u0301", 200), 200); msg != "" {
		t.Fatalf("200 composed characters: %s", msg)
	}
	if _, msg := NameLen(strings.Repeat("é", 201), 200); msg == "" {
		t.Fatal("201 characters accepted")
	}
	if _, msg := NameLen("   ", 200); msg == "" {
		t.Fatal("only white space accepted")
	}
}
