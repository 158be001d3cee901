package router

import (
	"sync"
	"sync/atomic"
	"testing"
)

// TestWorkspaceShareNeverExceedsItsBound: goroutines of a few workspaces acquire and release
// concurrently; no workspace ever has more than max counted, and nothing is left at the end.
func TestWorkspaceShareNeverExceedsItsBound(t *testing.T) {
	const max, workers, rounds = 4, 16, 2000
	s := newWorkspaceShare()
	wss := []string{"ws_a", "ws_b", "ws_c"}
	var held [3]atomic.Int64
	var over atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range rounds {
				k := (w + i) % len(wss)
				if !s.acquire(wss[k], max) {
					continue
				}
				if held[k].Add(1) > max {
					over.Add(1)
				}
				held[k].Add(-1)
				s.release(wss[k])
			}
		})
	}
	wg.Wait()
	if over.Load() != 0 {
		t.Fatalf("a workspace had more than %d requests counted %d times", max, over.Load())
	}
	if n := s.len(); n != 0 {
		t.Fatalf("%d workspaces still counted", n)
	}
	for _, ws := range wss {
		if !s.acquire(ws, 1) {
			t.Fatalf("%s refused after everything was released", ws)
		}
	}
}

// BenchmarkWorkspaceShare is one request's acquire and release, from every processor at once
// (workspaces spread over the shards).
func BenchmarkWorkspaceShare(b *testing.B) {
	s := newWorkspaceShare()
	var next atomic.Int64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		ws := "ws_" + string(rune('a'+next.Add(1)%26))
		for pb.Next() {
			if s.acquire(ws, 1<<20) {
				s.release(ws)
			}
		}
	})
}
