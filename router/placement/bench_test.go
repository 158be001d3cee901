package placement

import (
	"context"
	"strconv"
	"testing"
)

// BenchmarkLookupHit is the router's hot path: a fresh cached placement, many goroutines,
// many workspaces: 1,024, and 100,000 (the default cache size, the directory of the scale
// evidence in BENCHMARKS.md), visited in a scattered order so that each lookup meets memory
// the previous one did not warm.
func BenchmarkLookupHit(b *testing.B) {
	for _, n := range []int{1024, 100_000} {
		b.Run("workspaces="+strconv.Itoa(n), func(b *testing.B) {
			src := &source{m: map[string]Placement{}}
			ws := make([]string, n)
			for i := range ws {
				ws[i] = "ws_" + strconv.Itoa(i)
				src.set(ws[i], Placement{CellID: "cell-a", Epoch: 1})
			}
			c, err := New(src, Config{Size: n})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			for _, w := range ws {
				c.Lookup(ctx, w)
			}
			if c.Len() != n {
				b.Fatalf("%d cached, want %d", c.Len(), n)
			}
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					if _, o, _ := c.Lookup(ctx, ws[(i*7919)%n]); o != Hit {
						b.Fatal(o)
					}
					i++
				}
			})
		})
	}
}
