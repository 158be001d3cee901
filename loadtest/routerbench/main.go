package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"regexp"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"slices"
	"slidecells/router"
	"strconv"
	"strings"
	"syscall"
	"time"
)

type options struct {
	duration    time.Duration
	warmup      time.Duration
	connections int   // the count of the load running now
	connList    []int // -connections: each count is measured in turn
	threads     int
	rounds      int
	rate        int
	nginx       string
	wrk         string
	accessLog   bool
	cpuProfile  string
	keep        bool
	only        string
	headers     []string // sent with every request ("Name: value")
	real        bool
	bin         string
	routerBin   string
	workspaces  int // the workspace route's load is spread over this many workspaces
}

func main() {
	// The in-process router (and the bare proxy beside it) run with the router binary's GC
	// setting.
	router.TuneRuntime()
	var o options
	backend := flag.Bool("backend", false, "internal: run as the benchmark backend and print its address")
	fixedURL := flag.String("fixed-rate-url", "", "internal: run one fixed-rate load against this URL and print the result as JSON")
	flag.DurationVar(&o.duration, "duration", 10*time.Second, "length of each measured load")
	flag.DurationVar(&o.warmup, "warmup", 2*time.Second, "unmeasured load before each measured one")
	conns := flag.String("connections", "64,1024", "concurrent keep-alive connections; a comma-separated list measures each count in turn (the fixed-rate phase uses the first)")
	flag.IntVar(&o.threads, "threads", runtime.NumCPU(), "wrk threads")
	flag.IntVar(&o.rounds, "rounds", 3, "saturation rounds, each target's median reported; 0 skips saturation")
	flag.IntVar(&o.rate, "rate", 2000, "requests per second of the fixed-rate latency phase; 0 skips it")
	flag.StringVar(&o.nginx, "nginx", "nginx", "nginx binary; empty skips the nginx reference")
	flag.StringVar(&o.wrk, "wrk", "wrk", "wrk binary; empty or missing uses the built-in Go generator")
	flag.BoolVar(&o.accessLog, "access-log", true, "router and nginx write an access log line per request (to files in the temp dir)")
	flag.StringVar(&o.cpuProfile, "cpuprofile", "", "write CPU profiles of the in-process proxies' last saturation runs to this path plus .<target number>")
	flag.BoolVar(&o.keep, "keep", false, "keep the temp dir (configs, logs)")
	flag.StringVar(&o.only, "only", "", "measure only the proxies whose name matches this regular expression (nginx is always measured)")
	flag.BoolVar(&o.real, "real", false, "measure the real authenticated path instead: make run's router binary and nginx in front of the same cell (needs -bin)")
	flag.StringVar(&o.bin, "bin", "bin", "-real: folder of the built binaries (make build)")
	flag.IntVar(&o.workspaces, "workspaces", 16, "spread the workspace route's requests over this many workspaces (placed on the one cell), as many tenants' would be; one workspace alone holds at most the router's ROUTER_MAX_IN_FLIGHT_PER_WORKSPACE (256) requests in flight")
	flag.StringVar(&o.routerBin, "router-bin", "", "-real: another router binary (e.g. an older build) measured in the same rounds, in front of the same cell")
	flag.Parse()
	for _, f := range strings.Split(*conns, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "routerbench: -connections %q: want positive counts\n", *conns)
			os.Exit(2)
		}
		o.connList = append(o.connList, n)
	}
	o.connections = o.connList[0]

	if *backend {
		runBackend()
		return
	}
	if *fixedURL != "" {
		if err := runFixedRateChild(*fixedURL, o); err != nil {
			fmt.Fprintln(os.Stderr, "routerbench:", err)
			os.Exit(1)
		}
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	runMode := run
	if o.real {
		runMode = runReal
	}
	if err := runMode(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "routerbench:", err)
		os.Exit(1)
	}
}

// target is one thing to load: its URLs (each request goes to the next) and how to read the
// CPU time of the process serving it (the proxy; for direct, the backend).
type target struct {
	name string
	urls []string
	kind string // direct, router, bare, nginx
	cpu  func() cpuTime
}

// tempDir makes the run's temp dir (configs, logs), readable by nginx's workers, which drop to
// an unprivileged user when run as root; cleanup removes it unless -keep.
func tempDir(o options, prefix string) (dir string, cleanup func(), err error) {
	dir, err = os.MkdirTemp("", prefix)
	if err != nil {
		return "", nil, err
	}
	_ = os.Chmod(dir, 0o755)
	if o.keep {
		fmt.Fprintln(os.Stderr, "temp dir:", dir)
		return dir, func() {}, nil
	}
	return dir, func() { os.RemoveAll(dir) }, nil
}

func run(ctx context.Context, o options) error {
	dir, cleanup, err := tempDir(o, "routerbench-")
	if err != nil {
		return err
	}
	defer cleanup()

	be, err := startBackend()
	if err != nil {
		return fmt.Errorf("backend: %w", err)
	}
	defer be.stop()

	rt, err := startRouter(ctx, be.url, dir, o.accessLog, max(1, o.workspaces))
	if err != nil {
		return fmt.Errorf("router: %w", err)
	}
	defer rt.stop()

	bare, err := startBareProxy(be.url, false)
	if err != nil {
		return fmt.Errorf("bare proxy: %w", err)
	}
	defer bare.stop()
	lean, err := startBareProxy(be.url, true)
	if err != nil {
		return fmt.Errorf("bare proxy: %w", err)
	}
	defer lean.stop()

	version := func(base string) []string { return []string{base + "/api/v1/system/version"} }
	workspaces := func(base string) []string {
		var urls []string
		for _, ws := range rt.wss {
			urls = append(urls, base+"/api/v1/workspaces/"+ws)
		}
		return urls
	}
	targets := []target{
		{name: "direct (backend)", kind: "direct", urls: version(be.url), cpu: be.cpu},
		{name: "router, route without workspace", kind: "router", urls: version(rt.url), cpu: selfCPU},
		{name: "router, workspace route (cached placement)", kind: "router", urls: workspaces(rt.url), cpu: selfCPU},
		{name: "bare ReverseProxy, http.Transport", kind: "bare", urls: version(bare.url), cpu: selfCPU},
		{name: "bare ReverseProxy, router's transport", kind: "bare", urls: version(lean.url), cpu: selfCPU},
	}
	if o.only != "" {
		re, err := regexp.Compile(o.only)
		if err != nil {
			return fmt.Errorf("-only: %w", err)
		}
		targets = slices.DeleteFunc(targets, func(t target) bool { return !re.MatchString(t.name) })
	}
	if o.nginx != "" {
		if path, err := exec.LookPath(o.nginx); err != nil {
			fmt.Fprintf(os.Stderr, "nginx not found (%v); skipping the reference\n", err)
		} else {
			ng, err := startNginx(path, dir, be.addr, o.accessLog)
			if err != nil {
				return fmt.Errorf("nginx: %w", err)
			}
			defer ng.stop()
			// nginx proxies every path alike; it gets the workspace route's paths, so that the
			// load generator does the same work for it as for the router's busiest target.
			targets = append(targets, target{name: "nginx (reference proxy)", kind: "nginx", urls: workspaces(ng.url), cpu: ng.cpu})
		}
	}
	for _, t := range targets {
		if err := check(t.urls[0]); err != nil {
			return fmt.Errorf("%s: %w", t.name, err)
		}
	}

	loadBefore := loadAverage()
	satBy := make([][]result, len(o.connList))
	for i, n := range o.connList {
		o.connections = n
		sat, err := saturate(ctx, o, targets, be)
		if err != nil {
			return err
		}
		satBy[i] = sat
	}
	o.connections = o.connList[0]
	var fixed []result
	if o.rate > 0 {
		fixedRuns := make(map[string][]result)
		for round := range max(1, o.rounds) {
			for _, ti := range roundOrder(len(targets), round) {
				t := targets[ti]
				if ctx.Err() != nil {
					return ctx.Err()
				}
				fmt.Fprintf(os.Stderr, "fixed rate, round %d, %s: %d req/s for %v…\n", round+1, t.name, o.rate, o.duration)
				r, err := fixedRateInChild(ctx, t.urls[0], o)
				if err != nil {
					return fmt.Errorf("%s: %w", t.name, err)
				}
				fixedRuns[t.name] = append(fixedRuns[t.name], r)
			}
		}
		for _, t := range targets {
			fixed = append(fixed, median(t.name, fixedRuns[t.name]))
		}
	}
	printReport(os.Stdout, o, newGenerator(o).name(), satBy, fixed)
	fmt.Fprintf(os.Stdout, "\nHost load average (1, 5, 15 min) before: %s; after: %s. Other work on the host shares these CPUs.\n",
		loadBefore, loadAverage())
	return nil
}

// saturate runs o.rounds closed-loop loads at o.connections against every target and returns
// each target's medians.
func saturate(ctx context.Context, o options, targets []target, be *backend) ([]result, error) {
	gen := newGenerator(o)
	inProcessLoad := gen.inProcess()
	runs := make(map[string][]result)
	for round := range o.rounds {
		for _, ti := range roundOrder(len(targets), round) {
			t := targets[ti]
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			fmt.Fprintf(os.Stderr, "round %d/%d, %s: warm-up %v, load %v at %d connections…\n",
				round+1, o.rounds, t.name, o.warmup, o.duration, o.connections)
			if o.warmup > 0 {
				// A failed warm-up (nothing got through) says nothing the measured load will not.
				_, _ = gen.run(ctx, t.urls, o.warmup)
			}
			stopProfile := func() {}
			if o.cpuProfile != "" && round == o.rounds-1 && (t.kind == "router" || t.kind == "bare") {
				path := fmt.Sprintf("%s.c%d.%d", o.cpuProfile, o.connections, ti)
				fmt.Fprintf(os.Stderr, "CPU profile of %s: %s\n", t.name, path)
				var err error
				if stopProfile, err = profile(path); err != nil {
					return nil, err
				}
			}
			inProcess := t.kind == "router" || t.kind == "bare"
			cpu0, be0, gc0 := t.cpu(), be.cpu(), readGCCPU()
			r, err := gen.run(ctx, t.urls, o.duration)
			cpu1, be1, gc1 := t.cpu(), be.cpu(), readGCCPU()
			stopProfile()
			if err != nil {
				return nil, fmt.Errorf("%s: %w", t.name, err)
			}
			if inProcess && !inProcessLoad {
				r.gcShare = gc1.shareSince(gc0)
			}
			if n := r.rps * o.duration.Seconds(); n > 0 {
				if !(inProcessLoad && inProcess) {
					r.cpuPerReq = (cpu1.total() - cpu0.total()) / time.Duration(n)
					r.sysPerReq = (cpu1.sys - cpu0.sys) / time.Duration(n)
				}
				r.backendPerReq = (be1.total() - be0.total()) / time.Duration(n)
			}
			runs[t.name] = append(runs[t.name], r)
		}
	}
	var sat []result
	var nginxRuns []result
	for _, t := range targets {
		if t.kind == "nginx" {
			nginxRuns = runs[t.name]
		}
	}
	for _, t := range targets {
		if rs := runs[t.name]; len(rs) > 0 {
			m := median(t.name, rs)
			m.connections = o.connections
			for i := range min(len(rs), len(nginxRuns)) {
				if nginxRuns[i].rps > 0 {
					m.ratios = append(m.ratios, rs[i].rps/nginxRuns[i].rps)
				}
			}
			slices.Sort(m.ratios)
			sat = append(sat, m)
		}
	}
	return sat, nil
}

// roundOrder is the order in which a round loads the targets (indexes into them): each round
// starts one target later than the one before, so that no target always runs first (on a host
// still warming up) or always right after the same neighbour.
func roundOrder(n, round int) []int {
	order := make([]int, n)
	for i := range order {
		order[i] = (i + round) % n
	}
	return order
}

// gcCPU is this process's Go runtime CPU accounting (runtime/metrics): the in-process router's
// (and bare proxies') garbage collector against all the CPU its Go code used.
type gcCPU struct{ gc, total, idle float64 }

func readGCCPU() gcCPU {
	s := []metrics.Sample{{Name: "/cpu/classes/gc/total:cpu-seconds"}, {Name: "/cpu/classes/total:cpu-seconds"}, {Name: "/cpu/classes/idle:cpu-seconds"}}
	// The CPU classes are brought up to date at the end of a collection.
	runtime.GC()
	metrics.Read(s)
	return gcCPU{gc: s[0].Value.Float64(), total: s[1].Value.Float64(), idle: s[2].Value.Float64()}
}

// shareSince is the GC's share of the CPU used (not idle) between before and g.
func (g gcCPU) shareSince(before gcCPU) float64 {
	used := (g.total - g.idle) - (before.total - before.idle)
	if used <= 0 {
		return 0
	}
	return (g.gc - before.gc) / used
}

// loadAverage is /proc/loadavg's first three fields: how busy the host was, for the record.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// median returns, per figure, the median of the rounds.
func median(name string, rs []result) result {
	pick := func(f func(result) float64) float64 {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = f(r)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	return result{
		name:          name,
		rps:           pick(func(r result) float64 { return r.rps }),
		p50:           time.Duration(pick(func(r result) float64 { return float64(r.p50) })),
		p99:           time.Duration(pick(func(r result) float64 { return float64(r.p99) })),
		cpuPerReq:     time.Duration(pick(func(r result) float64 { return float64(r.cpuPerReq) })),
		sysPerReq:     time.Duration(pick(func(r result) float64 { return float64(r.sysPerReq) })),
		backendPerReq: time.Duration(pick(func(r result) float64 { return float64(r.backendPerReq) })),
		p999:          time.Duration(pick(func(r result) float64 { return float64(r.p999) })),
		errors:        int64(pick(func(r result) float64 { return float64(r.errors) })),
		gcShare:       pick(func(r result) float64 { return r.gcShare }),
		rounds:        len(rs),
	}
}

func profile(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}
