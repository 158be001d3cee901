package render

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
)

// BenchmarkDispatch measures dispatch transactions with two coordinators (two connection
// pools, as two replicas) against one cell database: each dispatch is the whole transaction
// (scheduler lock, occupancy, idle worker, pick, slot generation, attempt insert, cursor), timed
// one by one; the attempt is released right after, outside the timing, as a finished
// execution would. It reports dispatches per second and the p50/p99 latency.
//
//	go test ./cell/render -run '^$' -bench Dispatch -benchtime 1x
func BenchmarkDispatch(b *testing.B) {
	const coordinators, workers, requests, workspaces = 2, 16, 4000, 8
	f := setup(b, workspaces)
	ws := f.addWorkers(b, workers)
	cs := make([]*Coordinator, coordinators)
	for i := range cs {
		cs[i] = f.coordinator(b, ws, func(cfg *Config) { cfg.QueueSize = requests + 1; cfg.WorkspaceQueueSize = requests })
	}
	for i := range requests {
		cat := Interactive
		if i%4 == 3 {
			cat = Background
		}
		f.submit(b, cs[0], f.scopes[i%workspaces], i, cat)
	}
	ctx := context.Background()
	var mu sync.Mutex
	var lat []time.Duration
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for _, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				t0 := time.Now()
				r, err := c.dispatchOne(ctx)
				d := time.Since(t0)
				if err != nil {
					b.Error(err)
					return
				}
				if r == nil {
					var left int
					_ = f.db.Pool.QueryRow(ctx, `SELECT count(*) FROM render_requests WHERE state = 'queued'`).Scan(&left)
					if left == 0 {
						return
					}
					continue
				}
				mu.Lock()
				lat = append(lat, d)
				mu.Unlock()
				if _, err := c.db.Exec(ctx, `UPDATE render_attempts SET state = 'terminal', released = true WHERE attempt_id = $1`, r.attemptID); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	slices.Sort(lat)
	if len(lat) != requests {
		b.Fatalf("%d dispatches for %d requests", len(lat), requests)
	}
	p := func(q float64) float64 { return float64(lat[int(q*float64(len(lat)-1))].Microseconds()) / 1000 }
	b.ReportMetric(float64(len(lat))/elapsed.Seconds(), "dispatch/s")
	b.ReportMetric(p(0.50), "p50-ms")
	b.ReportMetric(p(0.99), "p99-ms")
	var retries int64
	for _, c := range cs {
		_ = c
	}
	fmt.Printf("dispatch: %d coordinators, %d workers, %d requests in %s\n", coordinators, workers, len(lat), elapsed.Round(time.Millisecond))
	_ = retries
}
