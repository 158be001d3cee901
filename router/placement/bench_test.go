package placement

import (
	"context"
	"strconv"
	"testing"
)

// BenchmarkLookupHit is the router's hot path: a fresh cached placement, many goroutines,
// many workspaces.
func BenchmarkLookupHit(b *testing.B) {
	src := &source{m: map[string]Placement{}}
	ws := make([]string, 1024)
	for i := range ws {
		ws[i] = "ws_" + strconv.Itoa(i)
		src.set(ws[i], Placement{CellID: "cell-a", Epoch: 1})
	}
	c, err := New(src, Config{})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for _, w := range ws {
		c.Lookup(ctx, w)
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			if _, o, _ := c.Lookup(ctx, ws[i%len(ws)]); o != Hit {
				b.Fatal(o)
			}
			i++
		}
	})
}
