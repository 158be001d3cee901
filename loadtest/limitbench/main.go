// Command limitbench shows the noisy-neighbour protection at work: on one cell, a quiet
// workspace reads its projects at a steady rate while another workspace of the same cell floods
// it with writes from many clients; it reports the quiet workspace's latency alone, under the
// flood with no limit, and under the flood with the flooding workspace limited (an override set
// as cellctl does) by clients that wait for Retry-After on a 429 as the API asks, and by clients
// that do not; and what the flood got through.
//
//	make build && go run ./loadtest/limitbench -duration 8s -flood 32 -limit 100
//
// It starts its own PostgreSQL, directory, two cells and the router on loopback, and stops them.
package main

import (
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

	"slidecells/deploy/stack"
	"slidecells/shared/directory"
)

func main() {
	duration := flag.Duration("duration", 8*time.Second, "length of each phase")
	flood := flag.Int("flood", 32, "flooding clients")
	limit := flag.Float64("limit", 100, "the flooding workspace's limit in the last phase, requests per second")
	quietRate := flag.Int("quiet", 20, "the quiet workspace's requests per second")
	bin := flag.String("bin", "bin", "folder with the built binaries (make build)")
	flag.Parse()
	if err := run(*duration, *flood, *limit, *quietRate, *bin); err != nil {
		fmt.Fprintln(os.Stderr, "limitbench:", err)
		os.Exit(1)
	}
}

func run(d time.Duration, flood int, limit float64, quietRate int, bin string) error {
	ctx := context.Background()
	bin, err := filepath.Abs(bin)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "limitbench-")
	if err != nil {
		return err
	}
	_ = os.Chmod(dir, 0o755)
	defer os.RemoveAll(dir)
	// No default limit: the phases differ by the flooding workspace's override only.
	s, err := stack.Start(ctx, stack.Options{Dir: dir, BinDir: bin, Cells: []string{"cell-a", "cell-b"},
		Env: map[string][]string{"cell": {"LOG_LEVEL=warn", "CELL_RATE_WORKSPACE=0", "CELL_RATE_TOKEN=0", "CELL_DIRECTORY_CACHE_TTL=1s"},
			"router": {"LOG_LEVEL=warn"}}})
	if err != nil {
		return err
	}
	defer s.Stop()
	demo, err := s.SeedDemo(ctx, filepath.Join(dir, "demo.json"))
	if err != nil {
		return err
	}
	quiet, err := s.Directory.CreateWorkspace(ctx, "Quiet", "cell-a", false)
	if err != nil {
		return err
	}
	if err := s.Directory.AddMember(ctx, quiet.ID, demo.UserID, "owner"); err != nil {
		return err
	}
	tr := &http.Transport{MaxIdleConnsPerHost: flood + 4}
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	do := func(method, ws, token, key, body string) (int, time.Duration, time.Duration) {
		req, _ := http.NewRequest(method, s.RouterURL+"/api/v1/projects", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("X-Workspace-ID", ws)
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
			req.Header.Set("Content-Type", "application/json")
		}
		t0 := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			return 0, time.Since(t0), 0
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		ra, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
		return resp.StatusCode, time.Since(t0), time.Duration(ra) * time.Second
	}
	for i := range 20 {
		do("POST", quiet.ID, demo.PAT, fmt.Sprintf("q%d", i), fmt.Sprintf(`{"name":"quiet %d"}`, i))
	}
	var seq atomic.Int64
	phase := func(name string, flooding, obey bool) {
		stop := make(chan struct{})
		var wg sync.WaitGroup
		var ok, limited, other atomic.Int64
		if flooding {
			for range flood {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						select {
						case <-stop:
							return
						default:
						}
						n := seq.Add(1)
						st, _, wait := do("POST", demo.WorkspaceA, demo.PAT, fmt.Sprintf("f%d", n), fmt.Sprintf(`{"name":"flood %d"}`, n))
						switch st {
						case 201:
							ok.Add(1)
						case 429:
							limited.Add(1)
							if obey {
								select {
								case <-stop:
								case <-time.After(wait):
								}
							}
						default:
							other.Add(1)
						}
					}
				}()
			}
		}
		time.Sleep(500 * time.Millisecond)
		var lat []time.Duration
		var quietErr int
		tick := time.NewTicker(time.Second / time.Duration(quietRate))
		end := time.Now().Add(d)
		for time.Now().Before(end) {
			<-tick.C
			st, l, _ := do("GET", quiet.ID, demo.PATReadOnly, "", "")
			if st != 200 {
				quietErr++
			}
			lat = append(lat, l)
		}
		tick.Stop()
		close(stop)
		wg.Wait()
		slices.Sort(lat)
		q := func(p float64) time.Duration {
			return lat[min(len(lat)-1, int(p*float64(len(lat))))].Round(100 * time.Microsecond)
		}
		secs := (d + 500*time.Millisecond).Seconds()
		fmt.Printf("%-34s quiet: p50 %8s  p99 %8s  max %8s  errors %d | flood: %6.0f/s written, %6.0f/s refused (429), other %d\n",
			name, q(0.5), q(0.99), lat[len(lat)-1].Round(100*time.Microsecond), quietErr, float64(ok.Load())/secs, float64(limited.Load())/secs, other.Load())
	}
	phase("alone", false, false)
	phase("flood, no limit", true, false)
	rate := limit
	burst := int64(limit)
	if err := s.Directory.SetLimits(ctx, directory.Limits{WorkspaceID: demo.WorkspaceA, RequestsPerSecond: &rate, Burst: &burst}); err != nil {
		return err
	}
	time.Sleep(1500 * time.Millisecond) // the cells' directory cache TTL
	phase(fmt.Sprintf("flood, limited to %.0f/s", limit), true, true)
	phase(fmt.Sprintf("flood ignoring Retry-After, %.0f/s", limit), true, false)
	return nil
}
