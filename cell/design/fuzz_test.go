package design

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzStyleRequest: any body parses without panicking; a body that parses and applies cleanly
// gives a snapshot that, sent back in form A, normalises to the same snapshot.
func FuzzStyleRequest(f *testing.F) {
	for _, s := range []string{
		`{"name":"S","page_width":1920,"page_height":1080}`,
		`{"name":"S","configuration":{"presentation":{"aspect_ratio":"16:9","theme_key":null}}}`,
		`{"version":2,"name":"T","font_scale":1.25,"background":"#ABC"}`,
		`{"name":"S","page_width":1,"configuration":{}}`,
		`[]`, `null`, `{"name":7}`,
	} {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, body string, update bool) {
		var r StyleRequest
		if r.Unmarshal([]byte(body)) != nil || len(r.Parse(update)) > 0 || update {
			return
		}
		p, errs := r.Apply(DefaultStylePresentation())
		if len(errs) > 0 {
			return
		}
		y, err := r.NewStyle()
		if err != nil {
			return // not an object
		}
		back, _ := json.Marshal(map[string]any{"name": *r.Name(), "configuration": map[string]any{"presentation": p}})
		var again StyleRequest
		if err := again.Unmarshal(back); err != nil {
			t.Fatal(err)
		}
		if errs := again.Parse(false); len(errs) > 0 {
			t.Fatalf("the normalised snapshot %s does not parse: %v", back, errs)
		}
		y2, err := again.NewStyle()
		if err != nil || y2.SnapshotDigest != y.SnapshotDigest {
			t.Fatalf("not a fixed point: %s vs %s (%v)", y.Snapshot, y2.Snapshot, err)
		}
	})
}

// FuzzParseUnicodeRange: never panics; a normalised range parses to itself.
func FuzzParseUnicodeRange(f *testing.F) {
	for _, s := range []string{"U+0000-00FF, U+0131", "u+4??", "U+10FFFF", "U+110000", "U+?", "U+00FF-0000", ",", " U+20 ,U+7E "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, msg := ParseUnicodeRange(s)
		if msg != "" {
			return
		}
		again, msg := ParseUnicodeRange(got)
		if msg != "" || again != got {
			t.Fatalf("%q normalised to %q, which gives %q %q", s, got, again, msg)
		}
	})
}

// FuzzParseFontWeight: never panics; an accepted weight prints back to a string that parses to
// the same range.
func FuzzParseFontWeight(f *testing.F) {
	for _, s := range []string{"400", "100 900", "900 100", "0", "1000", "+1", "1 ", " 1", "1  2", "01 0002"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		lo, hi, msg := ParseFontWeight(s)
		if msg != "" {
			return
		}
		if lo < 1 || hi > 1000 || lo > hi {
			t.Fatalf("%q accepted as %d..%d", s, lo, hi)
		}
		lo2, hi2, msg := ParseFontWeight(FontWeightText(lo, hi))
		if msg != "" || lo2 != lo || hi2 != hi {
			t.Fatalf("%q: %d..%d does not round-trip (%d..%d %q)", s, lo, hi, lo2, hi2, msg)
		}
	})
}

// FuzzCSSString: the quoted form is one CSS string that cannot end the string, the declaration
// or an enclosing <style> element.
func FuzzCSSString(f *testing.F) {
	for _, s := range []string{"Brand Sans", `a"b\c`, "</style><script>", "a\nb\x00c\x7f", "é 字 😀", `\`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) {
			return
		}
		q := CSSString(s)
		if len(q) < 2 || q[0] != '"' || q[len(q)-1] != '"' {
			t.Fatalf("not quoted: %s", q)
		}
		inner := q[1 : len(q)-1]
		if strings.ContainsAny(inner, "<>&\n\r\x00") {
			t.Fatalf("unescaped markup or control character in %s", q)
		}
		for i := 0; i < len(inner); i++ {
			switch inner[i] {
			case '\\':
				i++ // an escape: the next byte is escaped (or a hex escape starts)
			case '"':
				t.Fatalf("unescaped quote in %s", q)
			}
		}
	})
}
