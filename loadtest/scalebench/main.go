// Command scalebench gathers the scale evidence of BENCHMARKS.md.
//
// -mode cells runs the load generator's api scenario (loadtest/load: workspace and project
// reads, project lists, project creates with Idempotency-Key, in -workspaces workspaces per
// cell) closed loop with -workers requests in flight, against deployments of 1, 2 and 3 cells
// (-counts), each started afresh: every cell has its own PostgreSQL server and its own process,
// the directory its own PostgreSQL server, and one router fronts them. With -cell-cpu C each
// cell (its process and its PostgreSQL server) runs in a cgroup v1 CPU quota of C cores, the way
// a cell would be given its own machine share; 0 runs them uncapped on the shared host. It
// reports throughput, latency and each cell's CPU use and throttling.
//
// -mode directory puts -directory workspaces (100,000) straight into the directory database
// (COPY, alternating two cells), then drives the router with requests naming them
// (GET /api/v1/workspaces/{id} without a token: the cell refuses with 401 at once, so the router's
// placement work is what is measured) in three phases: cold (each workspace once), steady with
// Zipf-distributed workspaces (a few busy tenants, a long tail), steady with uniformly random
// workspaces. After each it reads the router's RSS (/proc) and its placement-lookup counters
// (/metrics) and reports the hit ratio of the phase.
//
//	make build && go run ./loadtest/scalebench -mode cells
//	make build && go run ./loadtest/scalebench -mode directory
//
// Everything runs on loopback and stops by itself.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	vegeta "github.com/tsenart/vegeta/v12/lib"

	"slidecells/deploy/stack"
	"slidecells/loadtest/load"
	"slidecells/shared/ids"
	"slidecells/shared/pgserver"
)

type options struct {
	mode       string
	bin        string
	counts     string
	cellCPU    float64
	workers    int
	workspaces int
	warmup     time.Duration
	duration   time.Duration
	directory  int
	routerEnv  string
	out        string
}

func main() {
	var o options
	flag.StringVar(&o.mode, "mode", "cells", "cells or directory")
	flag.StringVar(&o.bin, "bin", "bin", "folder of the built binaries (make build)")
	flag.StringVar(&o.counts, "counts", "1,2,3", "cells: numbers of cells to measure")
	flag.Float64Var(&o.cellCPU, "cell-cpu", 0.25, "cells: CPU quota of each cell and its PostgreSQL server, in cores (0: uncapped)")
	flag.IntVar(&o.workers, "workers", 48, "requests in flight (closed loop)")
	flag.IntVar(&o.workspaces, "workspaces", 8, "cells: load workspaces per cell")
	flag.DurationVar(&o.warmup, "warmup", 5*time.Second, "cells: unmeasured load before each measurement")
	flag.DurationVar(&o.duration, "duration", 20*time.Second, "length of each measured run (directory: of each steady phase)")
	flag.IntVar(&o.directory, "directory", 100_000, "directory: workspaces put into the directory")
	flag.StringVar(&o.routerEnv, "router-env", "", "extra router settings, space-separated NAME=value (e.g. ROUTER_PLACEMENT_TTL=5m)")
	flag.StringVar(&o.out, "out", "", "folder for results.json (default loadtest/results/scale-<mode>-<time>)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Minute)
	defer cancel()
	if o.out == "" {
		o.out = filepath.Join("loadtest", "results", "scale-"+o.mode+"-"+time.Now().Format("20060102-150405"))
	}
	var err error
	switch o.mode {
	case "cells":
		err = cells(ctx, o)
	case "directory":
		err = directoryMode(ctx, o)
	default:
		err = fmt.Errorf("unknown mode %q", o.mode)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "scalebench:", err)
		os.Exit(1)
	}
}

func logf(format string, args ...any) { fmt.Fprintf(os.Stderr, "• "+format+"\n", args...) }

func writeJSON(o options, v any) error {
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	b, _ := json.MarshalIndent(v, "", "  ")
	p := filepath.Join(o.out, "results.json")
	fmt.Println("results", p)
	return os.WriteFile(p, append(b, '\n'), 0o644)
}

// cellResult is one deployment size's measurement.
type cellResult struct {
	Cells     int                `json:"cells"`
	CellCPU   float64            `json:"cell_cpu_quota"`
	OKPerSec  float64            `json:"ok_per_s"`
	Requests  int                `json:"requests"`
	Errors    int                `json:"errors"`
	P50       float64            `json:"p50_ms"`
	P95       float64            `json:"p95_ms"`
	P99       float64            `json:"p99_ms"`
	CellCores map[string]float64 `json:"cell_cores_used"` // CPU used by each cell and its PostgreSQL, in cores
	Throttled map[string]float64 `json:"cell_throttled"`  // share of scheduler periods in which the quota ran out
	Ops       []load.Summary     `json:"operations"`
	LoadAvg   string             `json:"load_average"`
}

func cells(ctx context.Context, o options) error {
	var results []cellResult
	machine := load.ThisMachine()
	for _, c := range strings.Split(o.counts, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(c))
		if err != nil || n < 1 || n > 8 {
			return fmt.Errorf("bad count %q", c)
		}
		r, err := measureCells(ctx, o, n)
		if err != nil {
			return fmt.Errorf("%d cells: %w", n, err)
		}
		results = append(results, r)
	}
	fmt.Printf("\napi scenario, closed loop, %d requests in flight, %d workspaces per cell, %s measured after %s warm-up; cell CPU quota %s\n",
		o.workers, o.workspaces, o.duration, o.warmup, quota(o.cellCPU))
	fmt.Printf("machine: %s (load average at start %s)\n\n", machine.Kind(), machine.LoadAvg)
	fmt.Printf("| cells | ok/s | × 1 cell | p50 | p95 | p99 | errors | CPU used per cell (cores) | throttled periods | load average |\n|---:|---:|---:|---:|---:|---:|---:|---|---|---|\n")
	for _, r := range results {
		var cores, thr []string
		for i := 1; i <= r.Cells; i++ {
			id := cellName(i)
			cores = append(cores, fmt.Sprintf("%.2f", r.CellCores[id]))
			if t, ok := r.Throttled[id]; ok {
				thr = append(thr, fmt.Sprintf("%.0f%%", t*100))
			}
		}
		fmt.Printf("| %d | %.0f | %.2f | %.1f ms | %.1f ms | %.1f ms | %d | %s | %s | %s |\n", r.Cells, r.OKPerSec, r.OKPerSec/results[0].OKPerSec,
			r.P50, r.P95, r.P99, r.Errors, strings.Join(cores, " / "), strings.Join(thr, " / "), r.LoadAvg)
	}
	return writeJSON(o, map[string]any{"mode": "cells", "machine": machine, "commit": load.Commit(), "options": fmt.Sprintf("%+v", o), "results": results})
}

func quota(c float64) string {
	if c <= 0 {
		return "none (uncapped)"
	}
	return fmt.Sprintf("%.2f cores", c)
}

func cellName(i int) string { return fmt.Sprintf("cell-%d", i) }

func measureCells(ctx context.Context, o options, n int) (cellResult, error) {
	res := cellResult{Cells: n, CellCPU: o.cellCPU, CellCores: map[string]float64{}, Throttled: map[string]float64{}}
	bin, err := filepath.Abs(o.bin)
	if err != nil {
		return res, err
	}
	tmp, err := os.MkdirTemp("", "scalebench-")
	if err != nil {
		return res, err
	}
	_ = os.Chmod(tmp, 0o755)
	defer os.RemoveAll(tmp)
	groups := map[string]*cgroup{}
	defer func() {
		for _, g := range groups {
			g.remove()
		}
	}()
	var pgs []*pgserver.Server
	defer func() {
		for _, p := range pgs {
			_ = p.Stop()
		}
	}()
	startPG := func(name string) (*pgserver.Server, error) {
		p, err := pgserver.Start(ctx, pgserver.Options{Dir: filepath.Join(tmp, "pg-"+name), Log: func(string, ...any) {}})
		if err != nil {
			return nil, err
		}
		pgs = append(pgs, p)
		return p, p.CreateDatabase(ctx, strings.ReplaceAll(name, "-", "_"))
	}
	dirPG, err := startPG("directory")
	if err != nil {
		return res, err
	}
	var names []string
	cellURLs := map[string]string{}
	for i := 1; i <= n; i++ {
		name := cellName(i)
		names = append(names, name)
		p, err := startPG(name)
		if err != nil {
			return res, err
		}
		cellURLs[name] = p.URL(strings.ReplaceAll(name, "-", "_"))
		g, err := newCgroup("slidecells-scalebench-"+name, o.cellCPU)
		if err != nil {
			return res, err
		}
		groups[name] = g
		// The postmaster first: the backends it forks for the cell's connections inherit its group.
		pid, err := postmasterPid(filepath.Join(tmp, "pg-"+name))
		if err != nil {
			return res, err
		}
		if err := g.add(pid); err != nil {
			return res, err
		}
	}
	logf("starting %d cells (own PostgreSQL each, CPU quota %s)", n, quota(o.cellCPU))
	s, err := stack.Start(ctx, stack.Options{Dir: tmp, BinDir: bin, Cells: names, DirectoryURL: dirPG.URL("directory"), CellURLs: cellURLs,
		Env: map[string][]string{"cell": {"LOG_LEVEL=warn", "CELL_RATE_WORKSPACE=0", "CELL_RATE_TOKEN=0"}, "router": {"LOG_LEVEL=warn"}}, Log: func(string, ...any) {}})
	if err != nil {
		return res, err
	}
	defer s.Stop()
	for _, name := range names {
		if err := groups[name].add(s.Cells[name].Pid()); err != nil {
			return res, err
		}
	}
	f, err := load.NewFixture(ctx, s.RouterURL, s.Directory, load.FixtureOptions{PerCell: o.workspaces, Cells: names})
	if err != nil {
		return res, err
	}
	defer f.Close(context.WithoutCancel(ctx))
	logf("%d cells: warm-up %s", n, o.warmup)
	f.Run(ctx, load.NewRecorder(), f.APIAttacks(0, o.workers), o.warmup, nil)
	before := map[string]cpuStat{}
	for name, g := range groups {
		before[name] = g.stat()
	}
	rec := load.NewRecorder()
	logf("%d cells: measuring %s", n, o.duration)
	took := f.Run(ctx, rec, f.APIAttacks(0, o.workers), o.duration, func(l string) { fmt.Fprintln(os.Stderr, l) })
	for name, g := range groups {
		a, b := g.stat(), before[name]
		res.CellCores[name] = float64(a.usage-b.usage) / float64(took.Nanoseconds())
		if o.cellCPU > 0 && a.periods > b.periods {
			res.Throttled[name] = float64(a.throttled-b.throttled) / float64(a.periods-b.periods)
		}
	}
	samples := rec.Samples()
	res.Ops = load.Summarize(samples, took)
	all := load.Summarize(relabel(samples, "all"), took)[0]
	res.OKPerSec, res.Requests, res.Errors, res.P50, res.P95, res.P99 = all.PerSec, all.Count, all.Count-all.OK, all.P50, all.P95, all.P99
	res.LoadAvg = load.LoadAverage()
	logf("%d cells: %.0f ok/s, p50 %.1f ms, p99 %.1f ms, errors %d", n, res.OKPerSec, res.P50, res.P99, res.Errors)
	return res, nil
}

func relabel(ss []load.Sample, op string) []load.Sample {
	out := make([]load.Sample, len(ss))
	for i, s := range ss {
		s.Op = op
		out[i] = s
	}
	return out
}

// postmasterPid reads the postmaster's PID from the server's data folder.
func postmasterPid(dir string) (int, error) {
	b, err := os.ReadFile(filepath.Join(dir, "data", "postmaster.pid"))
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	return strconv.Atoi(strings.TrimSpace(line))
}

// cgroup is a cgroup v1 pair (cpu for the quota, cpuacct for the usage) of one cell.
type cgroup struct{ cpu, acct string }

type cpuStat struct{ usage, periods, throttled int64 }

func newCgroup(name string, cores float64) (*cgroup, error) {
	g := &cgroup{cpu: "/sys/fs/cgroup/cpu/" + name, acct: "/sys/fs/cgroup/cpuacct/" + name}
	for _, d := range []string{g.cpu, g.acct} {
		_ = os.Remove(d) // left over from an interrupted run (empty)
		if err := os.Mkdir(d, 0o755); err != nil {
			return nil, fmt.Errorf("cgroup v1 (cpu, cpuacct; needs root): %w", err)
		}
	}
	if cores > 0 {
		if err := os.WriteFile(g.cpu+"/cpu.cfs_period_us", []byte("100000"), 0o644); err != nil {
			return nil, err
		}
		if err := os.WriteFile(g.cpu+"/cpu.cfs_quota_us", []byte(strconv.Itoa(int(cores*100000))), 0o644); err != nil {
			return nil, err
		}
	}
	return g, nil
}

func (g *cgroup) add(pid int) error {
	for _, d := range []string{g.cpu, g.acct} {
		if err := os.WriteFile(d+"/cgroup.procs", []byte(strconv.Itoa(pid)), 0o644); err != nil {
			return fmt.Errorf("move %d into %s: %w", pid, d, err)
		}
	}
	return nil
}

func (g *cgroup) stat() cpuStat {
	var s cpuStat
	if b, err := os.ReadFile(g.acct + "/cpuacct.usage"); err == nil {
		s.usage, _ = strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	}
	if b, err := os.ReadFile(g.cpu + "/cpu.stat"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			k, v, _ := strings.Cut(l, " ")
			x, _ := strconv.ParseInt(v, 10, 64)
			switch k {
			case "nr_periods":
				s.periods = x
			case "nr_throttled":
				s.throttled = x
			}
		}
	}
	return s
}

// remove deletes the groups once their processes are gone (the stack stops them first).
func (g *cgroup) remove() {
	for _, d := range []string{g.cpu, g.acct} {
		for range 50 {
			if os.Remove(d) == nil || os.IsNotExist(func() error { _, err := os.Stat(d); return err }()) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// phase is one phase of the directory mode.
type phase struct {
	Name       string             `json:"name"`
	Requests   int                `json:"requests"`
	OKPerSec   float64            `json:"ok_per_s"`
	Errors     map[string]int     `json:"errors,omitempty"`
	P50        float64            `json:"p50_ms"`
	P99        float64            `json:"p99_ms"`
	Lookups    map[string]float64 `json:"lookups"` // by result, in this phase
	HitRatio   float64            `json:"hit_ratio"`
	Entries    float64            `json:"cache_entries"`
	RSSMiB     float64            `json:"router_rss_mib"`
	HWMMiB     float64            `json:"router_peak_rss_mib"`
	HeapMiB    float64            `json:"router_heap_inuse_mib"`
	AnonMiB    float64            `json:"router_rss_anon_mib"` // of RSS: anonymous memory (heap, stacks, the placement table)
	FileMiB    float64            `json:"router_rss_file_mib"` // of RSS: file pages (the binary)
	GoSysMiB   float64            `json:"router_go_sys_mib"`   // memory the Go runtime holds (heap, stacks, its own), not returned to the OS
	Seconds    float64            `json:"seconds"`
	CPUPerReq  float64            `json:"router_cpu_us_per_request"`
	Workspaces int                `json:"distinct_workspaces"`
}

func directoryMode(ctx context.Context, o options) error {
	bin, err := filepath.Abs(o.bin)
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "scalebench-")
	if err != nil {
		return err
	}
	_ = os.Chmod(tmp, 0o755)
	defer os.RemoveAll(tmp)
	routerEnv := []string{"LOG_LEVEL=warn"}
	if o.routerEnv != "" {
		routerEnv = append(routerEnv, strings.Fields(o.routerEnv)...)
	}
	logf("starting the directory, two cells and the router")
	s, err := stack.Start(ctx, stack.Options{Dir: tmp, BinDir: bin, Cells: []string{"cell-a", "cell-b"},
		Env: map[string][]string{"cell": {"LOG_LEVEL=warn", "CELL_RATE_WORKSPACE=0", "CELL_RATE_TOKEN=0"}, "router": routerEnv}, Log: func(string, ...any) {}})
	if err != nil {
		return err
	}
	defer s.Stop()
	logf("putting %d workspaces into the directory (COPY)", o.directory)
	wss, err := bulkWorkspaces(ctx, s.DirURL, o.directory, []string{"cell-a", "cell-b"})
	if err != nil {
		return err
	}
	pid := s.Router.Pid()
	client := load.NewClient()
	var phases []phase
	idle := phase{Name: "idle (router started, nothing cached)"}
	readRouter(client, s.RouterInternalURL, pid, &idle, nil)
	phases = append(phases, idle)
	run := func(name string, pick func(i int) (string, bool), d time.Duration) error {
		before := scrape(client, s.RouterInternalURL)
		cpu0 := procCPU(pid)
		seen := map[string]struct{}{}
		var seq int
		tr := func(t *vegeta.Target) error {
			ws, ok := pick(seq)
			seq++
			if !ok {
				return vegeta.ErrNoTargets
			}
			seen[ws] = struct{}{} // tr runs under locked's mutex
			t.Method, t.URL = http.MethodGet, s.RouterURL+"/api/v1/workspaces/"+ws
			return nil
		}
		rec := load.NewRecorder()
		f := &load.Fixture{Base: s.RouterURL, Client: client}
		logf("phase %s", name)
		limit := d
		if d == 0 { // until every target was sent (the context bounds it)
			limit = 30 * time.Minute
		}
		took := f.Run(ctx, rec, []load.Attack{{Op: "router.workspace", Targeter: locked(tr), Workers: o.workers, Accept: []int{401}, Driver: d == 0}},
			limit, func(l string) { fmt.Fprintln(os.Stderr, l) })
		sum := load.Summarize(rec.Samples(), took)[0]
		p := phase{Name: name, Requests: sum.Count, OKPerSec: sum.PerSec, Errors: sum.Errors, P50: sum.P50, P99: sum.P99, Seconds: took.Seconds(), Workspaces: len(seen)}
		readRouter(client, s.RouterInternalURL, pid, &p, before)
		if p.Requests > 0 {
			p.CPUPerReq = (procCPU(pid) - cpu0).Seconds() * 1e6 / float64(p.Requests)
		}
		phases = append(phases, p)
		logf("%s: %d requests, hit ratio %.4f, cache %0.f entries, router RSS %.1f MiB", name, p.Requests, p.HitRatio, p.Entries, p.RSSMiB)
		return ctx.Err()
	}
	perm := rand.Perm(len(wss))
	if err := run("cold: every workspace once", func(i int) (string, bool) {
		if i >= len(perm) {
			return "", false
		}
		return wss[perm[i]], true
	}, 0); err != nil {
		return err
	}
	zipf := rand.NewZipf(rand.New(rand.NewPCG(1, 2)), 1.1, 1, uint64(len(wss)-1))
	if err := run("steady: Zipf(1.1) over every workspace", func(int) (string, bool) { return wss[perm[zipf.Uint64()]], true }, o.duration); err != nil {
		return err
	}
	if err := run("steady: uniform over every workspace", func(int) (string, bool) { return wss[rand.IntN(len(wss))], true }, o.duration); err != nil {
		return err
	}
	machine := load.ThisMachine()
	fmt.Printf("\n%d workspaces in the directory; router settings: defaults %s; %d requests in flight; steady phases %s each\nmachine: %s (load average now %s)\n\n",
		o.directory, o.routerEnv, o.workers, o.duration, machine.Kind(), machine.LoadAvg)
	fmt.Printf("| phase | requests | req/s | p99 | distinct workspaces | hit | revalidating | miss | refreshed | from memory | cache entries | router RSS | peak RSS | of RSS: anonymous / file | Go runtime holds | Go heap in use | router CPU per request |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, p := range phases {
		fmt.Printf("| %s | %d | %.0f | %.1f ms | %d | %.0f | %.0f | %.0f | %.0f | %.2f%% | %.0f | %.1f MiB | %.1f MiB | %.1f / %.1f MiB | %.1f MiB | %.1f MiB | %.0f µs |\n", p.Name, p.Requests, p.OKPerSec, p.P99, p.Workspaces,
			p.Lookups["hit"], p.Lookups["revalidating"], p.Lookups["miss"], p.Lookups["refreshed"], p.HitRatio*100, p.Entries, p.RSSMiB, p.HWMMiB, p.AnonMiB, p.FileMiB, p.GoSysMiB, p.HeapMiB, p.CPUPerReq)
	}
	return writeJSON(o, map[string]any{"mode": "directory", "machine": machine, "commit": load.Commit(), "options": fmt.Sprintf("%+v", o), "phases": phases})
}

// locked serializes a targeter (vegeta calls it from many workers).
func locked(tr vegeta.Targeter) vegeta.Targeter {
	ch := make(chan struct{}, 1)
	return func(t *vegeta.Target) error {
		ch <- struct{}{}
		defer func() { <-ch }()
		return tr(t)
	}
}

// bulkWorkspaces writes n workspaces and their placements (alternating cells) with COPY and
// returns their IDs.
func bulkWorkspaces(ctx context.Context, dirURL string, n int, cells []string) ([]string, error) {
	conn, err := pgx.Connect(ctx, dirURL)
	if err != nil {
		return nil, err
	}
	defer conn.Close(ctx)
	wss := make([]string, n)
	for i := range wss {
		wss[i] = ids.New(ids.Workspace)
	}
	if _, err := conn.CopyFrom(ctx, pgx.Identifier{"workspaces"}, []string{"id", "name"}, pgx.CopyFromSlice(n, func(i int) ([]any, error) {
		return []any{wss[i], "bulk " + strconv.Itoa(i)}, nil
	})); err != nil {
		return nil, fmt.Errorf("copy workspaces: %w", err)
	}
	if _, err := conn.CopyFrom(ctx, pgx.Identifier{"placements"}, []string{"workspace_id", "cell_id"}, pgx.CopyFromSlice(n, func(i int) ([]any, error) {
		return []any{wss[i], cells[i%len(cells)]}, nil
	})); err != nil {
		return nil, fmt.Errorf("copy placements: %w", err)
	}
	return wss, nil
}

// readRouter fills a phase's router figures: RSS from /proc, cache counters from /metrics
// (lookups as the difference from before).
func readRouter(c *http.Client, base string, pid int, p *phase, before map[string]float64) {
	if f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			k, v, _ := strings.Cut(sc.Text(), ":")
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			switch k {
			case "VmRSS":
				p.RSSMiB = kb / 1024
			case "VmHWM":
				p.HWMMiB = kb / 1024
			case "RssAnon":
				p.AnonMiB = kb / 1024
			case "RssFile":
				p.FileMiB = kb / 1024
			}
		}
		f.Close()
	}
	after := scrape(c, base)
	p.Lookups = map[string]float64{}
	total := 0.0
	for _, r := range []string{"hit", "revalidating", "miss", "refreshed", "stale_served", "negative_hit"} {
		k := `router_placement_lookups_total{result="` + r + `"}`
		p.Lookups[r] = after[k] - before[k]
		total += p.Lookups[r]
	}
	if total > 0 {
		// Answered from memory: a fresh hit, or an entry past its TTL served at once while a
		// background load renews it (revalidating); misses and synchronous refreshes waited
		// for the directory.
		p.HitRatio = (p.Lookups["hit"] + p.Lookups["revalidating"]) / total
	}
	p.Entries = after["router_placement_cache_entries"]
	p.HeapMiB = after["go_memstats_heap_inuse_bytes"] / (1 << 20)
	p.GoSysMiB = (after["go_memstats_sys_bytes"] - after["go_memstats_heap_released_bytes"]) / (1 << 20)
}

// procCPU is the CPU time (user and system) a process used so far.
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command (which may hold spaces) start after the last ')'.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * time.Second / 100 // USER_HZ is 100 on Linux
}

// scrape reads the router's /metrics into series → value.
func scrape(c *http.Client, base string) map[string]float64 {
	out := map[string]float64{}
	resp, err := c.Get(base + "/metrics")
	if err != nil {
		return out
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, l := range strings.Split(string(b), "\n") {
		if l == "" || l[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(l, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(l[i+1:], 64)
		if err == nil {
			out[l[:i]] = v
		}
	}
	return out
}
