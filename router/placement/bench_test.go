package placement

import (
	"context"
	"hash/maphash"
	"strconv"
	"syscall"
	"testing"
	"time"

	"slidecells/shared/ids"
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
				ws[i] = ids.New(ids.Workspace)
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
			cpu0 := cpuTime()
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
			b.StopTimer()
			// ns/op is wall time, which a loaded shared host inflates (the benchmark waits for a
			// core); the process's CPU time per lookup is the steadier figure.
			b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
}

// cpuTime is the CPU time (user and system) the process used so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkKeyWalk is BenchmarkLookupHit's harness alone: the same walk over the same keys,
// each key hashed once (as the cache's shard choice does), so that its cost can be told apart
// from the lookup's when the keys do not fit the CPU's caches.
func BenchmarkKeyWalk(b *testing.B) {
	for _, n := range []int{1024, 100_000} {
		b.Run("workspaces="+strconv.Itoa(n), func(b *testing.B) {
			ws := make([]string, n)
			for i := range ws {
				ws[i] = ids.New(ids.Workspace)
			}
			seed := maphash.MakeSeed()
			var sink uint64
			b.ResetTimer()
			for i := range b.N {
				sink += maphash.String(seed, ws[(i*7919)%n])
			}
			if sink == 42 {
				b.Log(sink)
			}
		})
	}
}
