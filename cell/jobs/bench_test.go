package jobs

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"slidecells/shared/db/dbtest"
)

// BenchmarkNoopJobs measures the queue itself: no-op jobs claimed and finished per second by 8
// workers (2 replicas × 4 slots, each replica with its own pool of connections) on the test
// PostgreSQL, in three cases:
//
//   - nocap: one workspace, no cap, a backlog of 5,000; then the enqueue→start latency of a
//     steady 500 jobs/s (below capacity, each enqueue waking its replica);
//
//   - capped: 100 workspaces each capped at 2 running jobs, 5,000 jobs enqueued round-robin;
//
//   - backlog50k: one workspace, no cap, a backlog of 50,000 of which the first 5,000 are timed
//     (the claim's cost must not grow with the backlog).
//
//     go test -run '^$' -bench BenchmarkNoopJobs -benchtime 1x ./cell/jobs
//
// SLIDECELLS_BENCH_SHORT=1 streams for 2 s instead of 5 (make bench-check in CI); the drains
// stay at 5,000 jobs: 2,000 (a third of a second) moved by ±28 % between two runs of the same
// code.
func BenchmarkNoopJobs(b *testing.B) {
	measure, steady := 5000, 5*time.Second
	if os.Getenv("SLIDECELLS_BENCH_SHORT") != "" {
		steady = 2 * time.Second
	}
	b.Run("nocap", func(b *testing.B) { benchQueue(b, 1, 0, measure, measure, steady) })
	b.Run("capped", func(b *testing.B) { benchQueue(b, 100, 2, measure, measure, 0) })
	b.Run("backlog50k", func(b *testing.B) { benchQueue(b, 1, 0, 50000, measure, 0) })
}

// benchQueue drains the first measure jobs of a backlog spread round-robin over workspaces
// (each capped at capPer running jobs, 0: no cap), then, when steady is set, streams jobs at
// 500/s for that long and reports their enqueue→start latency.
func benchQueue(b *testing.B, workspaces, capPer, backlog, measure int, steady time.Duration) {
	const (
		replicas, slots = 2, 4
		rate            = 500 // jobs/s in the latency phase
	)
	f := setup(b)
	ctx := context.Background()
	var done atomic.Int64
	noop := map[string]Handler{"noop": func(context.Context, *Run) (json.RawMessage, error) { return nil, nil }}
	// Each replica has its own queue handle (its own wake-up) and connection pool.
	queues := make([]*Queue, replicas)
	for i := range queues {
		queues[i] = &Queue{DB: dbtest.Open(b, f.cellURL)}
	}
	// The backlog: workspace 0 is f.scope's; the others are workspaces the cell hosts.
	ws := []string{f.scope.WorkspaceID()}
	for i := 1; i < workspaces; i++ {
		ws = append(ws, fmt.Sprintf("ws_bench%03d", i))
	}
	exec := func(sql string, args ...any) {
		if _, err := f.q.DB.Pool.Exec(ctx, sql, args...); err != nil {
			b.Fatal(err)
		}
	}
	exec(`INSERT INTO tenancy (workspace_id, epoch, state) SELECT w, 1, 'active' FROM unnest($1::TEXT[]) AS w ON CONFLICT DO NOTHING`, ws)
	exec(`INSERT INTO mutation_jobs (workspace_id, id, kind, owner_id, input, status, max_attempts, run_after, created_at, updated_at)
		SELECT ($1::TEXT[])[1 + i % $2], 'job_bench' || lpad(i::TEXT, 7, '0'), 'noop', 'usr_bench', '{}', 'pending', 3,
			now() - INTERVAL '1 hour' + i * INTERVAL '1 microsecond', now(), now()
		FROM generate_series(0, $3 - 1) AS i`, ws, len(ws), backlog)
	exec(`ANALYZE mutation_jobs`)
	// The backlog's dirty pages are written now rather than by a checkpoint that may fall inside
	// the timed drain (5,000 jobs last under a second).
	exec(`CHECKPOINT`)
	startPools := func() func() {
		pctx, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		for _, q := range queues {
			p := &Pool{Queue: q, Handlers: noop, Slots: slots, PollInterval: 50 * time.Millisecond, WorkspaceConcurrency: capPer,
				Observe: func(_, state string) {
					if state == Succeeded {
						done.Add(1)
					}
				}}
			wg.Add(1)
			go func() { defer wg.Done(); _ = p.Run(pctx) }()
		}
		return func() { cancel(); wg.Wait() }
	}
	waitDone := func(n int) {
		deadline := time.Now().Add(3 * time.Minute)
		for done.Load() < int64(n) {
			if time.Now().After(deadline) {
				b.Fatalf("%d of %d jobs done in 3 minutes", done.Load(), n)
			}
			time.Sleep(2 * time.Millisecond)
		}
	}

	// Throughput: drain the first measure jobs of the backlog.
	b.ResetTimer()
	start := time.Now()
	stop := startPools()
	defer stop()
	waitDone(measure)
	took := time.Since(start)
	b.ReportMetric(float64(measure)/took.Seconds(), "jobs/s")
	if steady == 0 {
		stop()
		return
	}
	waitDone(backlog)

	// Latency: a steady stream below capacity, each enqueue waking its replica.
	var mark time.Time
	if err := f.q.DB.Pool.QueryRow(ctx, `SELECT now()`).Scan(&mark); err != nil {
		b.Fatal(err)
	}
	tick := time.NewTicker(time.Second / rate)
	deadline := time.Now().Add(steady)
	sent := 0
	for time.Now().Before(deadline) {
		<-tick.C
		q := queues[sent%replicas]
		if _, err := q.Enqueue(ctx, f.scope, NewJob{Kind: "noop", Input: sent}); err != nil {
			b.Fatal(err)
		}
		q.Notify()
		sent++
	}
	tick.Stop()
	waitDone(backlog + sent)
	stop()
	b.StopTimer()
	rows, err := f.q.DB.Pool.Query(ctx, `SELECT extract(epoch FROM started_at - created_at) FROM mutation_jobs WHERE created_at > $1`, mark)
	if err != nil {
		b.Fatal(err)
	}
	var lat []float64
	for rows.Next() {
		var s float64
		if err := rows.Scan(&s); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, s*1000)
	}
	slices.Sort(lat)
	if len(lat) == 0 {
		b.Fatal("no latency samples")
	}
	b.ReportMetric(lat[len(lat)/2], "p50-start-ms")
	b.ReportMetric(lat[len(lat)*99/100], "p99-start-ms")
	b.ReportMetric(float64(len(lat)), "samples")
}
