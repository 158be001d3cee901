package jobs

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"testing"
	"time"

	"slidecells/shared/db/dbtest"
)

// BenchmarkNoopJobs measures the queue itself: no-op jobs claimed and finished per second by 8
// workers (2 replicas × 4 slots, each replica with its own pool of connections) on the
// serializable test PostgreSQL, and the enqueue→start latency at a steady rate below capacity.
//
//	go test -run '^$' -bench BenchmarkNoopJobs -benchtime 1x ./cell/jobs
func BenchmarkNoopJobs(b *testing.B) {
	const (
		replicas, slots = 2, 4
		backlog         = 5000
		rate            = 500 // jobs/s in the latency phase
		steady          = 5 * time.Second
	)
	f := setup(b)
	ctx := context.Background()
	noop := map[string]Handler{"noop": func(context.Context, *Run) (json.RawMessage, error) { return nil, nil }}
	// Each replica has its own queue handle (its own wake-up) and connection pool.
	queues := make([]*Queue, replicas)
	for i := range queues {
		queues[i] = &Queue{DB: dbtest.Open(b, f.cellURL)}
	}
	enqueue := func(q *Queue, n int) {
		var wg sync.WaitGroup
		for w := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := w; i < n; i += 8 {
					if _, err := q.Enqueue(ctx, f.scope, NewJob{Kind: "noop", Input: map[string]int{"i": i}}); err != nil {
						b.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
	}
	count := func(status string) int {
		var n int
		if err := f.q.DB.Pool.QueryRow(ctx, `SELECT count(*) FROM mutation_jobs WHERE status = $1`, status).Scan(&n); err != nil {
			b.Fatal(err)
		}
		return n
	}
	startPools := func() func() {
		pctx, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		for _, q := range queues {
			p := &Pool{Queue: q, Handlers: noop, Slots: slots, PollInterval: 50 * time.Millisecond}
			wg.Add(1)
			go func() { defer wg.Done(); _ = p.Run(pctx) }()
		}
		return func() { cancel(); wg.Wait() }
	}

	// Throughput: drain a backlog.
	enqueue(f.q, backlog)
	b.ResetTimer()
	start := time.Now()
	stop := startPools()
	for count(Succeeded) < backlog {
		if time.Since(start) > 2*time.Minute {
			b.Fatal("backlog not drained in 2 minutes")
		}
		time.Sleep(5 * time.Millisecond)
	}
	took := time.Since(start)
	b.ReportMetric(float64(backlog)/took.Seconds(), "jobs/s")

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
	for count(Succeeded) < backlog+sent {
		time.Sleep(5 * time.Millisecond)
	}
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
