package ids

import "testing"

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
