// Command idembench measures what exactly-once writes cost: project creates per second through
// the router with 16 clients, on a cell with the idempotency layer (every request carries a new
// Idempotency-Key) against a benchmark cell without it (CELL_BENCH_IDEMPOTENCY_OFF), in
// alternating rounds of one run so that machine noise hits both alike. It reports throughput,
// p50/p99, errors by status, serialization retries (the cell's cell_tx_retries_total) and the
// keys left executing afterwards.
//
//	make build && go run ./loadtest/idembench -duration 10s -clients 16 -rounds 3
//
// It starts its own PostgreSQL, directory, two cells and the router on loopback, and stops them.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"slidecells/deploy/stack"
)

type options struct {
	duration time.Duration
	warmup   time.Duration
	clients  int
	rounds   int
	bin      string
	keep     bool
}

func main() {
	var o options
	flag.DurationVar(&o.duration, "duration", 10*time.Second, "length of each measured round")
	flag.DurationVar(&o.warmup, "warmup", 2*time.Second, "unmeasured load before the first round of each mode")
	flag.IntVar(&o.clients, "clients", 16, "concurrent clients (keep-alive connections)")
	flag.IntVar(&o.rounds, "rounds", 3, "rounds per mode, alternating")
	flag.StringVar(&o.bin, "bin", "bin", "folder with the built binaries (make build)")
	flag.BoolVar(&o.keep, "keep", false, "keep the temp dir (logs)")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "idembench:", err)
		os.Exit(1)
	}
}

type result struct {
	n      int
	took   time.Duration
	lat    []time.Duration
	byCode map[int]int
	perSec float64
	p50    time.Duration
	p99    time.Duration
}

func run(o options) error {
	ctx := context.Background()
	bin, err := filepath.Abs(o.bin)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "idembench-")
	if err != nil {
		return err
	}
	_ = os.Chmod(dir, 0o755) // PostgreSQL runs as its own user when we are root
	if !o.keep {
		defer os.RemoveAll(dir)
	} else {
		fmt.Println("temp dir:", dir)
	}
	s, err := stack.Start(ctx, stack.Options{
		Dir: dir, BinDir: bin, Cells: []string{"bench-keys", "bench-nokeys"},
		Env: map[string][]string{"bench-nokeys": {"CELL_BENCH_IDEMPOTENCY_OFF=1"}, "cell": {"LOG_LEVEL=warn", "CELL_RATE_WORKSPACE=0", "CELL_RATE_TOKEN=0"}},
		Log: func(f string, a ...any) { fmt.Fprintf(os.Stderr, f+"\n", a...) },
	})
	if err != nil {
		return err
	}
	defer s.Stop()
	demo, err := s.SeedDemo(ctx, filepath.Join(dir, "demo.json"))
	if err != nil {
		return err
	}
	modes := []struct {
		name, ws string
	}{{"with keys", demo.WorkspaceA}, {"without", demo.WorkspaceB}}
	tr := &http.Transport{MaxIdleConnsPerHost: o.clients, MaxConnsPerHost: o.clients}
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	var seq atomic.Int64
	load := func(ws string, d time.Duration) result {
		r := result{byCode: map[int]int{}}
		var mu sync.Mutex
		var wg sync.WaitGroup
		start := time.Now()
		stop := start.Add(d)
		for range o.clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var lat []time.Duration
				codes := map[int]int{}
				for time.Now().Before(stop) {
					n := seq.Add(1)
					req, _ := http.NewRequest(http.MethodPost, s.RouterURL+"/api/v1/projects",
						strings.NewReader(`{"name":"bench `+strconv.FormatInt(n, 10)+`"}`))
					req.Header.Set("Authorization", "Bearer "+demo.PAT)
					req.Header.Set("X-Workspace-ID", ws)
					req.Header.Set("Content-Type", "application/json")
					req.Header.Set("Idempotency-Key", "bench-"+strconv.FormatInt(n, 10))
					t0 := time.Now()
					resp, err := client.Do(req)
					if err != nil {
						codes[599]++
						continue
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					lat = append(lat, time.Since(t0))
					codes[resp.StatusCode]++
				}
				mu.Lock()
				r.lat = append(r.lat, lat...)
				for c, k := range codes {
					r.byCode[c] += k
				}
				mu.Unlock()
			}()
		}
		wg.Wait()
		r.took = time.Since(start)
		r.n = len(r.lat)
		slices.Sort(r.lat)
		if r.n > 0 {
			r.p50, r.p99 = r.lat[r.n/2], r.lat[min(r.n-1, r.n*99/100)]
		}
		ok := r.byCode[200] + r.byCode[201]
		r.perSec = float64(ok) / r.took.Seconds()
		return r
	}
	for _, m := range modes {
		load(m.ws, o.warmup)
	}
	retriesBefore, _ := scrape(s.Cells["bench-keys"].URL, "cell_tx_retries_total")
	results := map[string][]result{}
	for round := range o.rounds {
		for i := range modes {
			m := modes[(i+round)%len(modes)]
			r := load(m.ws, o.duration)
			results[m.name] = append(results[m.name], r)
			fmt.Fprintf(os.Stderr, "round %d %-9s %6.0f creates/s  p50 %-8s p99 %-8s statuses %v\n",
				round+1, m.name, r.perSec, r.p50.Round(10*time.Microsecond), r.p99.Round(10*time.Microsecond), r.byCode)
		}
	}
	retriesAfter, _ := scrape(s.Cells["bench-keys"].URL, "cell_tx_retries_total")
	claims, err := countClaims(ctx, s.CellDBURL["bench-keys"])
	if err != nil {
		return err
	}
	fmt.Printf("\n%-10s %10s %10s %10s %10s %s\n", "mode", "creates/s", "p50", "p99", "requests", "non-2xx")
	med := map[string]result{}
	for _, m := range modes {
		rs := results[m.name]
		slices.SortFunc(rs, func(a, b result) int { return int(a.perSec - b.perSec) })
		r := rs[len(rs)/2]
		med[m.name] = r
		bad := 0
		total := 0
		for _, x := range rs {
			for c, k := range x.byCode {
				total += k
				if c/100 != 2 {
					bad += k
				}
			}
		}
		fmt.Printf("%-10s %10.0f %10s %10s %10d %d\n", m.name, r.perSec, r.p50.Round(10*time.Microsecond), r.p99.Round(10*time.Microsecond), total, bad)
	}
	fmt.Printf("\nthroughput ratio with/without idempotency (medians): %.2f\n", med["with keys"].perSec/med["without"].perSec)
	for round := range o.rounds {
		fmt.Printf("  round %d: %.2f\n", round+1, results["with keys"][round].perSec/results["without"][round].perSec)
	}
	fmt.Printf("serialization retries on the idempotent cell during the rounds: %.0f\n", retriesAfter-retriesBefore)
	fmt.Printf("keys left executing (a lock without its answer): %d\n", claims)
	return nil
}

// scrape sums every sample of a metric family on a cell's /metrics.
func scrape(base, name string) (float64, error) {
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sum := 0.0
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name) {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err == nil {
			sum += v
		}
	}
	return sum, sc.Err()
}

func countClaims(ctx context.Context, url string) (int, error) {
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		return 0, err
	}
	defer c.Close(ctx)
	var n int
	// Every committed lock has its answer; a lock without one would be a key stuck executing.
	err = c.QueryRow(ctx, `SELECT count(*) FROM idempotency_locks l WHERE NOT EXISTS (
		SELECT 1 FROM idempotency_keys k WHERE k.workspace_id = l.workspace_id AND k.user_id = l.user_id
		AND k.operation_id = l.operation_id AND k.idem_key = l.idem_key)`).Scan(&n)
	return n, err
}
