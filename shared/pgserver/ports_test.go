package pgserver

import (
	"net"
	"strconv"
	"testing"
)

func TestFreePortIsBelowTheEphemeralRangeAndNeverRepeats(t *testing.T) {
	seen := map[int]bool{}
	for range 50 {
		p, err := FreePort()
		if err != nil {
			t.Fatal(err)
		}
		if p < reservedLow || p >= ephemeralLow() {
			t.Fatalf("port %d outside [%d, %d)", p, reservedLow, ephemeralLow())
		}
		if seen[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		seen[p] = true
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			t.Fatalf("port %d is not free: %v", p, err)
		}
		l.Close()
	}
}
