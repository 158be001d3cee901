package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// result is one load's figures.
type result struct {
	name          string
	rps           float64
	p50, p99      time.Duration
	p999          time.Duration // fixed-rate phase only
	errors        int64
	cpuPerReq     time.Duration // CPU of the serving process per request; 0 when unknown
	sysPerReq     time.Duration // the part of cpuPerReq spent in the kernel
	backendPerReq time.Duration // CPU of the backend per request
	rounds        int
	connections   int
	// gcShare is the garbage collector's share of the in-process proxy's CPU during the load
	// (runtime/metrics); 0 when not measured (nginx, direct, or load generated in process).
	gcShare float64
	// ratios are this target's req/s over nginx's in the same round, one per round, sorted:
	// the fairest comparison on a noisy host, since the two loads ran seconds apart.
	ratios []float64
}

// generator produces load against URLs of one server for a while (each request goes to the
// next URL) and measures it.
type generator interface {
	run(ctx context.Context, urls []string, d time.Duration) (result, error)
	name() string
	// inProcess reports whether the load is generated in this process, which then also
	// shows in the in-process router's CPU time.
	inProcess() bool
}

func newGenerator(o options) generator {
	if o.wrk != "" {
		if path, err := exec.LookPath(o.wrk); err == nil {
			return wrk{path: path, threads: o.threads, connections: o.connections, headers: o.headers}
		}
	}
	return &goLoad{connections: o.connections, headers: o.headers}
}

// wrk runs the wrk binary and reads its --latency report.
type wrk struct {
	path        string
	threads     int
	connections int
	headers     []string // "Name: value", sent with every request
}

func (w wrk) name() string {
	return fmt.Sprintf("wrk (%d threads; wrk's own latency percentiles)", w.threads)
}

var (
	wrkRPS        = regexp.MustCompile(`Requests/sec:\s+([0-9.]+)`)
	wrkPercentile = regexp.MustCompile(`(?m)^\s+(50|99)%\s+([0-9.]+[a-z]+)\s*$`)
	wrkNon2xx     = regexp.MustCompile(`Non-2xx or 3xx responses:\s+(\d+)`)
	wrkSocket     = regexp.MustCompile(`Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)`)
)

func (w wrk) inProcess() bool { return false }

func (w wrk) run(ctx context.Context, urls []string, d time.Duration) (result, error) {
	secs := max(1, int(d.Round(time.Second)/time.Second))
	script, err := wrkScript(urls)
	if err != nil {
		return result{}, err
	}
	defer os.Remove(script)
	args := []string{"-t", strconv.Itoa(min(w.threads, w.connections)),
		"-c", strconv.Itoa(w.connections), "-d", strconv.Itoa(secs) + "s", "--latency", "-s", script}
	for _, h := range w.headers {
		args = append(args, "-H", h)
	}
	cmd := exec.CommandContext(ctx, w.path, append(args, urls[0])...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return result{}, fmt.Errorf("wrk: %w: %s", err, out)
	}
	return parseWrk(string(out))
}

// wrkScript writes the wrk script that sends each request to the next of urls' paths (all on
// one server), the requests formatted once per thread. Every target gets one, a single path
// included, so that wrk does the same work per request whatever it loads.
func wrkScript(urls []string) (string, error) {
	var b strings.Builder
	b.WriteString("-- routerbench: each request goes to the next path.\nlocal paths = {")
	for i, u := range urls {
		p, err := url.Parse(u)
		if err != nil {
			return "", err
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Quote(p.RequestURI()))
	}
	b.WriteString(`}
local requests, n = {}, 0
function init(args)
  for i, p in ipairs(paths) do requests[i] = wrk.format(nil, p) end
end
function request()
  n = n % #requests + 1
  return requests[n]
end
`)
	f, err := os.CreateTemp("", "routerbench-*.lua")
	if err != nil {
		return "", err
	}
	_, err = f.WriteString(b.String())
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return f.Name(), err
}

func parseWrk(out string) (result, error) {
	var r result
	m := wrkRPS.FindStringSubmatch(out)
	if m == nil {
		return r, fmt.Errorf("no Requests/sec in wrk output:\n%s", out)
	}
	r.rps, _ = strconv.ParseFloat(m[1], 64)
	for _, pm := range wrkPercentile.FindAllStringSubmatch(out, -1) {
		v, err := time.ParseDuration(pm[2])
		if err != nil {
			return r, fmt.Errorf("wrk percentile %q: %w", pm[2], err)
		}
		if pm[1] == "50" {
			r.p50 = v
		} else {
			r.p99 = v
		}
	}
	if (r.p50 == 0 || r.p99 == 0) && r.rps > 0 {
		return r, fmt.Errorf("no latency distribution in wrk output:\n%s", out)
	}
	// A load that got nothing through (a proxy that collapsed) is a result, not an error: 0 req/s.
	if m := wrkNon2xx.FindStringSubmatch(out); m != nil {
		n, _ := strconv.ParseInt(m[1], 10, 64)
		r.errors += n
	}
	if m := wrkSocket.FindStringSubmatch(out); m != nil {
		for _, s := range m[1:] {
			n, _ := strconv.ParseInt(s, 10, 64)
			r.errors += n
		}
	}
	return r, nil
}

// goLoad is the fallback generator: a closed loop per connection, every latency kept, exact
// percentiles.
type goLoad struct {
	connections int
	headers     []string
}

func (g *goLoad) name() string { return "the built-in Go generator (exact percentiles)" }

func (g *goLoad) inProcess() bool { return true }

func (g *goLoad) run(ctx context.Context, urls []string, d time.Duration) (result, error) {
	tr := &http.Transport{MaxIdleConnsPerHost: g.connections, MaxConnsPerHost: g.connections, DisableCompression: true}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var errs atomic.Int64
	lat := make([][]time.Duration, g.connections)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range g.connections {
		url := urls[i%len(urls)]
		wg.Go(func() {
			own := make([]time.Duration, 0, 1<<16)
			for ctx.Err() == nil {
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
				for _, h := range g.headers {
					k, v, _ := strings.Cut(h, ":")
					req.Header.Add(k, strings.TrimSpace(v))
				}
				t0 := time.Now()
				res, err := client.Do(req)
				if err != nil {
					if ctx.Err() == nil {
						errs.Add(1)
					}
					continue
				}
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
				own = append(own, time.Since(t0))
				if res.StatusCode != http.StatusOK {
					errs.Add(1)
				}
			}
			lat[i] = own
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	all := slices.Concat(lat...)
	if len(all) == 0 {
		return result{}, fmt.Errorf("no request completed against %s", urls[0])
	}
	slices.Sort(all)
	pct := func(p float64) time.Duration { return all[min(len(all)-1, int(p*float64(len(all))))] }
	return result{rps: float64(len(all)) / elapsed.Seconds(), p50: pct(0.50), p99: pct(0.99), errors: errs.Load()}, nil
}

// fixedRate sends requests at a fixed total rate, spread round robin over a fixed set of
// keep-alive connections (one client each, as wrk holds its connections), well below
// saturation. Each request is measured from the moment it was due, not from when it could be
// sent, so a stall shows in the percentiles instead of quietly lowering the rate.
type fixedRate struct {
	rate    int
	clients []*http.Client
}

func newFixedRate(connections, rate int) *fixedRate {
	f := &fixedRate{rate: rate}
	for range connections {
		f.clients = append(f.clients, &http.Client{Transport: &http.Transport{
			MaxIdleConnsPerHost: 1, MaxConnsPerHost: 1, DisableCompression: true,
		}})
	}
	return f
}

func (f *fixedRate) run(ctx context.Context, url string, d time.Duration) (result, error) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	n := len(f.clients)
	dues := make([]chan time.Time, n)
	lat := make([][]time.Duration, n)
	var errs atomic.Int64
	var wg sync.WaitGroup
	for i, c := range f.clients {
		dues[i] = make(chan time.Time, max(1, f.rate/n)) // about a second of backlog each
		wg.Go(func() {
			for t0 := range dues[i] {
				req, _ := http.NewRequest(http.MethodGet, url, nil)
				res, err := c.Do(req)
				if err != nil {
					errs.Add(1)
					continue
				}
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
				lat[i] = append(lat[i], time.Since(t0))
				if res.StatusCode != http.StatusOK {
					errs.Add(1)
				}
			}
		})
	}
	start := time.Now()
	interval := time.Second / time.Duration(f.rate)
	sent := 0
	for ctx.Err() == nil {
		next := start.Add(time.Duration(sent) * interval)
		if wait := time.Until(next); wait > 0 {
			time.Sleep(wait)
			continue
		}
		select {
		case dues[sent%n] <- next:
		default:
			errs.Add(1) // a connection more than a second behind: count it, keep the schedule
		}
		sent++
	}
	for _, c := range dues {
		close(c)
	}
	wg.Wait()
	all := slices.Concat(lat...)
	if len(all) == 0 {
		return result{}, fmt.Errorf("no request completed against %s", url)
	}
	slices.Sort(all)
	pct := func(p float64) time.Duration { return all[min(len(all)-1, int(p*float64(len(all))))] }
	return result{rps: float64(len(all)) / d.Seconds(), p50: pct(0.50), p99: pct(0.99), p999: pct(0.999), errors: errs.Load()}, nil
}

// fixedRateInChild runs the fixed-rate load from a child process (this binary, re-executed), so
// the generator's own allocations and goroutines do not share the in-process router's Go
// runtime and skew the latencies being measured.
func fixedRateInChild(ctx context.Context, url string, o options) (result, error) {
	self, err := os.Executable()
	if err != nil {
		return result{}, err
	}
	cmd := exec.CommandContext(ctx, self, "-fixed-rate-url", url, "-rate", strconv.Itoa(o.rate),
		"-connections", strconv.Itoa(o.connections), "-duration", o.duration.String(), "-warmup", o.warmup.String())
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return result{}, fmt.Errorf("fixed-rate child: %w", err)
	}
	var j fixedJSON
	if err := json.Unmarshal(out, &j); err != nil {
		return result{}, fmt.Errorf("fixed-rate child output %q: %w", out, err)
	}
	return result{rps: j.RPS, p50: j.P50, p99: j.P99, p999: j.P999, errors: j.Errors}, nil
}

type fixedJSON struct {
	RPS            float64
	P50, P99, P999 time.Duration
	Errors         int64
}

func runFixedRateChild(url string, o options) error {
	f := newFixedRate(o.connections, o.rate)
	ctx := context.Background()
	if o.warmup > 0 {
		if _, err := f.run(ctx, url, o.warmup); err != nil {
			return err
		}
	}
	r, err := f.run(ctx, url, o.duration)
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(fixedJSON{RPS: r.rps, P50: r.p50, P99: r.p99, P999: r.p999, Errors: r.errors})
}
