package compile_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"slidecells/cell/compile"
)

// BenchmarkCompilePage20 compiles a page importing 20 small components, some
// of which share a nested component (22 components in all), one compile at a
// time, and reports the median and 99th percentile of the compile durations
// besides the mean.
//
//	go test ./cell/compile -run '^$' -bench CompilePage20 -benchtime 2000x -count 3
func BenchmarkCompilePage20(b *testing.B) {
	page, cs := twentyComponents()
	c := newCompiler(b, 1)
	req := compile.Request{Kind: compile.KindPage, Entry: page, Resolver: &resolver{comps: cs}}
	ctx := context.Background()
	res, err := c.Compile(ctx, req)
	if err != nil || !res.OK() {
		b.Fatalf("compile: %v %s", err, list(res.Diagnostics))
	}
	durations := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		// A fresh resolver each time, as each compile would get.
		req.Resolver = &resolver{comps: cs}
		if _, err := c.Compile(ctx, req); err != nil {
			b.Fatal(err)
		}
		durations = append(durations, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(durations)
	at := func(q float64) float64 {
		return float64(durations[int(q*float64(len(durations)-1))].Microseconds())
	}
	b.ReportMetric(at(0.50), "p50-µs")
	b.ReportMetric(at(0.99), "p99-µs")
	b.ReportMetric(float64(len(res.Code)), "out-bytes")
}
