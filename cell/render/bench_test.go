package render

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"slidecells/shared/db"
)

// BenchmarkDispatch measures dispatch transactions with two coordinators (two connection
// pools, as two replicas) against one cell database, as the dispatch loop runs them: each
// transaction (one round trip: BEGIN, scheduler lock, dispatch statements, COMMIT) reserves up
// to dispatchBatchMax attempts while workers are idle, timed one by one, each of its
// dispatches counted with the transaction's time; the attempts are released right after,
// outside the timing and through another pool, as finished executions would be. It reports
// dispatches per second, the p50/p99 latency of a dispatch, and the CPU time the coordinators'
// PostgreSQL backends spent per dispatch (when the server is a local process: the figure a
// busy host inflates least).
//
//	go test ./cell/render -run '^$' -bench Dispatch -benchtime 1x
//
// SLIDECELLS_BENCH_SHORT=1 dispatches 1,000 requests instead of 4,000 (make bench-check in CI);
// RENDER_BENCH_BATCH=n makes up to n dispatches per transaction (default dispatchBatchMax).
func BenchmarkDispatch(b *testing.B) {
	const coordinators, workers, workspaces = 2, 16, 8
	requests := 4000
	if os.Getenv("SLIDECELLS_BENCH_SHORT") != "" {
		requests = 1000
	}
	batch := dispatchBatchMax
	if n, err := strconv.Atoi(os.Getenv("RENDER_BENCH_BATCH")); err == nil && n > 0 {
		batch = n
	}
	f := setup(b, workspaces)
	ws := f.addWorkers(b, workers)
	cs := make([]*Coordinator, coordinators)
	for i := range cs {
		cs[i] = f.coordinator(b, ws, func(cfg *Config) {
			cfg.QueueSize, cfg.WorkspaceQueueSize = requests+1, requests
			// No request may expire while a slow host submits the backlog: an expired one is
			// never dispatched, and the benchmark would wait for it.
			cfg.RequestTimeout = time.Hour
		})
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
	pools := make([]*db.DB, len(cs))
	for i, c := range cs {
		pools[i] = c.db
	}
	cpu0 := backendCPU(ctx, pools...)
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for _, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				t0 := time.Now()
				rs, _, err := c.dispatchBatch(ctx, batch)
				d := time.Since(t0)
				if err != nil {
					b.Error(err)
					return
				}
				if len(rs) == 0 {
					var left int
					_ = f.db.Pool.QueryRow(ctx, `SELECT count(*) FROM render_requests WHERE state = 'queued'`).Scan(&left)
					if left == 0 {
						return
					}
					continue
				}
				mu.Lock()
				for range rs {
					lat = append(lat, d)
				}
				mu.Unlock()
				for _, r := range rs {
					if _, err := f.db.Exec(ctx, `UPDATE render_attempts SET state = 'terminal', released = true WHERE attempt_id = $1`, r.attemptID); err != nil {
						b.Error(err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	cpu := cpuSpent(cpu0, backendCPU(ctx, pools...))
	slices.Sort(lat)
	if len(lat) != requests {
		b.Fatalf("%d dispatches for %d requests", len(lat), requests)
	}
	p := func(q float64) float64 { return float64(lat[int(q*float64(len(lat)-1))].Microseconds()) / 1000 }
	b.ReportMetric(float64(len(lat))/elapsed.Seconds(), "dispatch/s")
	b.ReportMetric(p(0.50), "p50-ms")
	b.ReportMetric(p(0.99), "p99-ms")
	if cpu >= 0 {
		b.ReportMetric(cpu*1000/float64(len(lat)), "server-cpu-ms/dispatch")
	}
	fmt.Printf("dispatch: %d coordinators, %d workers, %d requests in %s, up to %d per transaction\n", coordinators, workers, len(lat), elapsed.Round(time.Millisecond), batch)
}
