package ids

import (
	"strings"
	"testing"
)

func TestNewIsValid(t *testing.T) {
	seen := map[string]bool{}
	for i := 0; i < 1000; i++ {
		id := New(Workspace)
		if !Valid(Workspace, id) {
			t.Fatalf("New produced invalid %q", id)
		}
		if seen[id] {
			t.Fatalf("duplicate %q", id)
		}
		seen[id] = true
	}
}

func TestValidRejects(t *testing.T) {
	good := New(Workspace)
	for _, s := range []string{"", "ws_", "ws_abc", good + "a", "prj" + good[2:], "WS" + good[2:],
		good[:len(good)-1] + "1", good[:5] + "!" + good[6:], "ws-" + good[3:]} {
		if Valid(Workspace, s) {
			t.Errorf("Valid(%q) = true", s)
		}
	}
}

func TestCellIDValid(t *testing.T) {
	for s, want := range map[string]bool{"cell-a": true, "c1": true, "": false, "1cell": false, "Cell": false, "cell_a": false} {
		if got := CellIDValid(s); got != want {
			t.Errorf("CellIDValid(%q) = %v", s, got)
		}
	}
}

// TestValidMeansDecodable pins what Valid relies on: every string of bodyLen alphabet
// characters decodes.
func TestValidMeansDecodable(t *testing.T) {
	const alphabet = "abcdefghijklmnopqrstuvwxyz234567"
	for i := range 2000 {
		b := make([]byte, bodyLen)
		for j := range b {
			b[j] = alphabet[(i*7+j*13+i*j)%len(alphabet)]
		}
		if i < len(alphabet) {
			b[bodyLen-1] = alphabet[i] // every last character
		}
		if _, err := encoding.DecodeString(string(b)); err != nil {
			t.Fatalf("%q: %v", b, err)
		}
		if !Valid(Workspace, Workspace+"_"+string(b)) {
			t.Fatalf("%q not valid", b)
		}
	}
}

func TestBytes(t *testing.T) {
	t.Run("every new ID decodes to its own bits", func(t *testing.T) {
		seen := map[[16]byte]bool{}
		for range 1000 {
			id := New(Workspace)
			b, ok := Bytes(Workspace, id)
			if !ok {
				t.Fatalf("%s refused", id)
			}
			want, err := encoding.DecodeString(id[len(Workspace)+1:])
			if err != nil || string(want) != string(b[:]) {
				t.Fatalf("%s: %x, want %x (%v)", id, b, want, err)
			}
			if seen[b] {
				t.Fatalf("%s: bits seen before", id)
			}
			seen[b] = true
		}
	})
	t.Run("a non-canonical spelling is refused, not folded", func(t *testing.T) {
		id := New(Workspace)
		for _, c := range "abcdefghijklmnopqrstuvwxyz234567" {
			alt := id[:len(id)-1] + string(c)
			_, ok := Bytes(Workspace, alt)
			if canonical := lowBitsZero(byte(c)); ok != canonical {
				t.Errorf("%s: ok=%v, want %v", alt, ok, canonical)
			}
		}
	})
	t.Run("invalid IDs and other prefixes are refused", func(t *testing.T) {
		for _, s := range []string{"", "ws_", "ws_1", New(Project), "ws_" + New(Project)[4:] + "a", "WS" + New(Workspace)[2:]} {
			if _, ok := Bytes(Workspace, s); ok {
				t.Errorf("%q accepted", s)
			}
		}
	})
}

// lowBitsZero says whether c, as the last character, spells a canonical ID: the two low bits
// of its value (the bits past the 128th) are zero.
func lowBitsZero(c byte) bool {
	v := strings.IndexByte("abcdefghijklmnopqrstuvwxyz234567", c)
	return v&3 == 0
}
