package digest

import (
	"strings"
	"testing"
)

func TestBytesKnownVector(t *testing.T) {
	got := Bytes([]byte("abc"))
	want := "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
	if got != want {
		t.Fatalf("Bytes(abc) = %s, want %s", got, want)
	}
}

func TestJSONIgnoresFieldAndMapOrder(t *testing.T) {
	type a struct {
		Z int    `json:"z"`
		A string `json:"a"`
	}
	type b struct {
		A string `json:"a"`
		Z int    `json:"z"`
	}
	d1, err := JSON(a{Z: 1, A: "<x>"})
	if err != nil {
		t.Fatal(err)
	}
	d2, err := JSON(b{A: "<x>", Z: 1})
	if err != nil {
		t.Fatal(err)
	}
	d3, err := JSON(map[string]any{"z": 1, "a": "<x>"})
	if err != nil {
		t.Fatal(err)
	}
	if d1 != d2 || d1 != d3 {
		t.Fatalf("digests differ: %s %s %s", d1, d2, d3)
	}
}

func TestCanonicalForm(t *testing.T) {
	got, err := Canonical(map[string]any{"b": []int{2, 1}, "a": map[string]string{"y": "<", "x": "&"}})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"a":{"x":"&","y":"<"},"b":[2,1]}`
	if string(got) != want {
		t.Fatalf("Canonical = %s, want %s", got, want)
	}
}

func TestJSONDistinguishesValues(t *testing.T) {
	d1, _ := JSON(map[string]int{"a": 1})
	d2, _ := JSON(map[string]int{"a": 2})
	if d1 == d2 {
		t.Fatal("different values share a digest")
	}
}

func TestValid(t *testing.T) {
	cases := []struct {
		name string
		in   string
		want bool
	}{
		{"good", Bytes(nil), true},
		{"no prefix", strings.TrimPrefix(Bytes(nil), Prefix), false},
		{"upper hex", strings.ToUpper(Bytes(nil)), false},
		{"short", Bytes(nil)[:20], false},
		{"non hex", Prefix + strings.Repeat("g", 64), false},
		{"empty", "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Valid(tc.in); got != tc.want {
				t.Fatalf("Valid(%q) = %v, want %v", tc.in, got, tc.want)
			}
			if (Check(tc.in) == nil) != tc.want {
				t.Fatalf("Check(%q) disagrees with Valid", tc.in)
			}
		})
	}
}

func TestJSONRejectsUnencodable(t *testing.T) {
	if _, err := JSON(make(chan int)); err == nil {
		t.Fatal("expected an error for a channel")
	}
}
