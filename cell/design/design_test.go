package design

import (
	"slices"
	"strings"
	"testing"

	"slidecells/shared/problem"
)

func fields(errs []problem.FieldError) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Field)
	}
	return out
}

func TestNormalizeHex(t *testing.T) {
	for _, c := range []struct{ name, in, want string }{
		{"short", "#ABC", "#aabbcc"},
		{"short with alpha", "#abcd", "#aabbccdd"},
		{"long", "#A0B1C2", "#a0b1c2"},
		{"long with alpha", "#A0B1C2FF", "#a0b1c2ff"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := NormalizeHex(c.in); got != c.want {
				t.Fatalf("NormalizeHex(%q) = %q, want %q", c.in, got, c.want)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

func TestThemeChangeCheck(t *testing.T) {
	for _, c := range []struct {
		name   string
		change ThemeChange
		want   []string
	}{
		{"valid", ThemeChange{ThemeScales: ThemeScales{Colors: map[string]string{"accent": "#0f0"}, Spacing: []int{0, 4}}}, nil},
		{"bad color name", ThemeChange{ThemeScales: ThemeScales{Colors: map[string]string{"Accent": "#0f0"}}}, []string{"colors.Accent"}},
		{"bad color value", ThemeChange{ThemeScales: ThemeScales{Colors: map[string]string{"accent": "green"}}}, []string{"colors.accent"}},
		{"decreasing spacing", ThemeChange{ThemeScales: ThemeScales{Spacing: []int{0, 8, 4}}}, []string{"spacing[2]"}},
		{"radius out of range", ThemeChange{ThemeScales: ThemeScales{Radius: []int{0, MaxRadiusPx + 1}}}, []string{"radius[1]"}},
		{"family and preset", ThemeChange{ThemeFontBindings: ThemeFontBindings{BodyFontFamilyID: ptr("ffam_x"), BodyFontPreset: ptr("system-ui")}},
			[]string{"body_font_family_id", "body_font_preset"}},
		{"preset of another role", ThemeChange{ThemeFontBindings: ThemeFontBindings{CodeFontPreset: ptr("system-ui")}}, []string{"code_font_preset"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, errs := c.change.Check()
			if got := fields(errs); !slices.Equal(got, c.want) {
				t.Fatalf("fields %v, want %v", got, c.want)
			}
		})
	}
}

func TestNewThemeDefaults(t *testing.T) {
	th, err := ThemeChange{Key: "brand", Name: ptr("Brand")}.NewTheme()
	if err != nil {
		t.Fatal(err)
	}
	if th.Colors["primary"] == "" || len(th.Spacing) == 0 || th.Fonts["code"].Preset != "platform-mono" {
		t.Fatalf("defaults missing: %+v", th)
	}
	_, css := ThemeCSS(th, Typography("ws_x", th))
	if !strings.HasPrefix(css, ":root {\n  --color-background: #ffffff;") || !strings.Contains(css, "--font-code: \"DejaVu Sans Mono\", monospace;") {
		t.Fatalf("css %s", css)
	}
}

func TestParseFontWeight(t *testing.T) {
	for _, c := range []struct {
		name, in string
		lo, hi   int
		ok       bool
	}{
		{"one", "400", 400, 400, true},
		{"range", "100 900", 100, 900, true},
		{"inverted range", "900 100", 0, 0, false},
		{"zero", "0", 0, 0, false},
		{"too heavy", "1001", 0, 0, false},
		{"sign", "+400", 0, 0, false},
		{"two spaces", "100  900", 0, 0, false},
		{"three", "100 200 300", 0, 0, false},
		{"fraction", "400.5", 0, 0, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			lo, hi, msg := ParseFontWeight(c.in)
			if (msg == "") != c.ok || lo != c.lo || hi != c.hi {
				t.Fatalf("ParseFontWeight(%q) = %d %d %q", c.in, lo, hi, msg)
			}
		})
	}
}

func TestParseUnicodeRange(t *testing.T) {
	for _, c := range []struct {
		name, in, want string
		ok             bool
	}{
		{"empty", "", "", true},
		{"normalised", "u+0000-00ff, U+131", "U+0000-00FF, U+131", true},
		{"wildcard", "U+4??", "U+4??", true},
		{"wildcard in the middle", "U+4?1", "", false},
		{"wildcard range", "U+4??-5FF", "", false},
		{"beyond unicode", "U+110000", "", false},
		{"backwards", "U+00FF-0000", "", false},
		{"not a range", "latin", "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, msg := ParseUnicodeRange(c.in)
			if (msg == "") != c.ok || got != c.want {
				t.Fatalf("ParseUnicodeRange(%q) = %q %q", c.in, got, msg)
			}
		})
	}
}

func TestCSSString(t *testing.T) {
	for _, c := range []struct{ name, in, want string }{
		{"plain", "Brand Sans", `"Brand Sans"`},
		{"quote and backslash", `a"b\c`, `"a\"b\\c"`},
		{"markup", "</style>", `"\3c /style\3e "`},
		{"control", "a\nb", `"a\a b"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := CSSString(c.in); got != c.want {
				t.Fatalf("CSSString(%q) = %s, want %s", c.in, got, c.want)
			}
		})
	}
}

func TestStyleRequestForms(t *testing.T) {
	for _, c := range []struct {
		name, body string
		update     bool
		want       []string
	}{
		{"form A", `{"name":"S","configuration":{"presentation":{"page_width":1920,"page_height":1080}}}`, false, nil},
		{"form B", `{"name":"S","page_width":1920,"page_height":1080}`, false, nil},
		{"both forms", `{"name":"S","page_width":1,"configuration":{"presentation":{}}}`, false, []string{"body"}},
		{"neither form", `{"name":"S"}`, false, []string{"body"}},
		{"name-only update", `{"version":1,"name":"T"}`, true, nil},
		{"update without version", `{"name":"T"}`, true, []string{"version"}},
		{"unknown field", `{"name":"S","page_width":1280,"colour":"red"}`, false, []string{"colour"}},
		{"bad layout", `{"name":"S","default_layout":"grid"}`, false, []string{"default_layout"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var r StyleRequest
			if err := r.Unmarshal([]byte(c.body)); err != nil {
				t.Fatal(err)
			}
			if got := fields(r.Parse(c.update)); !slices.Equal(got, c.want) {
				t.Fatalf("fields %v, want %v", got, c.want)
			}
		})
	}
	var a, b StyleRequest
	_ = a.Unmarshal([]byte(`{"name":"S","configuration":{"presentation":{"page_width":1920,"page_height":1080,"background":"#FFF"}}}`))
	_ = b.Unmarshal([]byte(`{"name":"S","page_width":1920,"page_height":1080,"background":"#fff"}`))
	a.Parse(false)
	b.Parse(false)
	ya, errA := a.NewStyle()
	yb, errB := b.NewStyle()
	if errA != nil || errB != nil || ya.SnapshotDigest != yb.SnapshotDigest {
		t.Fatalf("forms differ: %v %v %s %s", errA, errB, ya.Snapshot, yb.Snapshot)
	}
}
