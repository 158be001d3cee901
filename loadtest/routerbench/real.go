package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"slidecells/deploy/stack"
	"slidecells/shared/pgserver"
	"slidecells/shared/proc"
)

// runReal measures the real authenticated path (-real): the local deployment of `make run`
// (deploy/stack: PostgreSQL, the directory, one cell and the router binary, all as their own
// processes with their default settings, from -bin) with its demo data, and nginx in front of
// the same cell. wrk sends GET /api/v1/projects (the project list) with the demo token and
// X-Workspace-ID naming the demo workspace through the router and through nginx, in alternating order, round after round; each
// round's router/nginx ratio is printed with the median. The cell's per-workspace and
// per-token rate limits are turned off (CELL_RATE_WORKSPACE=0, CELL_RATE_TOKEN=0), or they
// would answer most of the load with 429; everything else is as `make run` starts it.
func runReal(ctx context.Context, o options) error {
	for _, b := range []string{"router", "cell"} {
		if _, err := os.Stat(filepath.Join(o.bin, b)); err != nil {
			return fmt.Errorf("-real needs the built binaries in -bin %s (make build): %w", o.bin, err)
		}
	}
	nginx, err := exec.LookPath(o.nginx)
	if o.nginx == "" || err != nil {
		return errors.New("-real needs nginx on PATH (-nginx)")
	}
	dir, cleanup, err := tempDir(o, "routerbench-real-")
	if err != nil {
		return err
	}
	defer cleanup()

	fmt.Fprintln(os.Stderr, "starting the local deployment (PostgreSQL, directory, cell-a, router)…")
	st, err := stack.Start(ctx, stack.Options{
		Dir: dir, BinDir: o.bin, Cells: []string{"cell-a"},
		Env: map[string][]string{"cell": {"CELL_RATE_WORKSPACE=0", "CELL_RATE_TOKEN=0"}},
	})
	if err != nil {
		return fmt.Errorf("stack: %w (logs in %s/logs; -keep keeps them)", err, dir)
	}
	defer st.Stop()
	demo, err := st.SeedDemo(ctx, filepath.Join(dir, "demo.json"))
	if err != nil {
		return fmt.Errorf("demo data: %w", err)
	}
	cell := st.Cells["cell-a"]
	cu, err := url.Parse(cell.URL)
	if err != nil {
		return err
	}
	ng, err := startNginx(nginx, dir, cu.Host, o.accessLog)
	if err != nil {
		return fmt.Errorf("nginx: %w", err)
	}
	defer ng.stop()

	var targets []target
	if o.routerBin != "" {
		other, err := startOtherRouter(o.routerBin, dir, st.DirURL)
		if err != nil {
			return fmt.Errorf("-router-bin: %w", err)
		}
		defer other.stop()
		pid := other.pid
		targets = append(targets, target{name: "router (" + o.routerBin + ")", kind: "router", urls: []string{other.url}, cpu: func() cpuTime { return procCPU(pid) }})
	}

	path := "/api/v1/projects"
	o.headers = []string{"Authorization: Bearer " + demo.PAT, "X-Workspace-ID: " + demo.WorkspaceA}
	routerPid, cellPid := st.Router.Pid(), cell.Pid()
	targets = append([]target{
		{name: "router (make run's binary)", kind: "router", urls: []string{st.RouterURL + path}, cpu: func() cpuTime { return procCPU(routerPid) }},
		{name: "nginx in front of the same cell", kind: "nginx", urls: []string{ng.url + path}, cpu: ng.cpu},
	}, targets...)
	for i := 2; i < len(targets); i++ {
		targets[i].urls[0] += path
	}
	fmt.Fprintf(os.Stderr, "router pid %d, cell pid %d\n", routerPid, cellPid)
	for _, t := range targets {
		// The router takes the cell once its first probe passed: a few seconds at most.
		deadline := time.Now().Add(30 * time.Second)
		for {
			err := check(t.urls[0], o.headers...)
			if err == nil {
				break
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				return fmt.Errorf("%s: %w", t.name, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	cellCPU := func() time.Duration { return procCPU(cellPid).total() }
	pgCPU := func() time.Duration { return postgresCPU() }

	loadBefore := loadAverage()
	o.connections = o.connList[0]
	gen := newGenerator(o)
	runs := map[string][]result{}
	pgPer := map[string][]time.Duration{}
	for round := range max(1, o.rounds) {
		for _, ti := range roundOrder(len(targets), round) {
			t := targets[ti]
			if ctx.Err() != nil {
				return ctx.Err()
			}
			fmt.Fprintf(os.Stderr, "round %d/%d, %s: warm-up %v, load %v at %d connections…\n",
				round+1, max(1, o.rounds), t.name, o.warmup, o.duration, o.connections)
			if o.warmup > 0 {
				_, _ = gen.run(ctx, t.urls, o.warmup)
			}
			cpu0, cell0, pg0 := t.cpu(), cellCPU(), pgCPU()
			r, err := gen.run(ctx, t.urls, o.duration)
			cpu1, cell1, pg1 := t.cpu(), cellCPU(), pgCPU()
			if err != nil {
				return fmt.Errorf("%s: %w", t.name, err)
			}
			if n := r.rps * o.duration.Seconds(); n > 0 {
				r.cpuPerReq = (cpu1.total() - cpu0.total()) / time.Duration(n)
				r.sysPerReq = (cpu1.sys - cpu0.sys) / time.Duration(n)
				r.backendPerReq = (cell1 - cell0) / time.Duration(n)
				pgPer[t.name] = append(pgPer[t.name], (pg1-pg0)/time.Duration(n))
			}
			runs[t.name] = append(runs[t.name], r)
		}
	}
	printReal(os.Stdout, o, gen.name(), targets, runs, pgPer)
	fmt.Fprintf(os.Stdout, "\nHost load average (1, 5, 15 min) before: %s; after: %s. Other work on the host shares these CPUs.\n",
		loadBefore, loadAverage())
	return nil
}

func printReal(w io.Writer, o options, generator string, targets []target, runs map[string][]result, pgPer map[string][]time.Duration) {
	fmt.Fprintf(w, "\nReal authenticated path: GET /api/v1/projects (X-Workspace-ID) with a personal access token (the demo data of make run), %d connections, closed loop from %s, %v per load after %v warm-up, %d rounds, router and nginx alternating.\n\n",
		o.connections, generator, o.duration, o.warmup, max(1, o.rounds))
	fmt.Fprintln(w, "| target | req/s | p50 | p99 | proxy CPU per request (of it in the kernel) | cell CPU per request | PostgreSQL CPU per request | errors |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|")
	med := map[string]result{}
	for _, t := range targets {
		m := median(t.name, runs[t.name])
		med[t.name] = m
		pg := slices.Clone(pgPer[t.name])
		slices.Sort(pg)
		pgMed := time.Duration(0)
		if len(pg) > 0 {
			pgMed = pg[len(pg)/2]
		}
		fmt.Fprintf(w, "| %s | %.0f | %s | %s | %s | %s | %s | %d |\n", t.name, m.rps, ms(m.p50), ms(m.p99), cpuCell(m), us(m.backendPerReq), us(pgMed), m.errors)
	}
	fmt.Fprintln(w)
	ng := runs[targets[1].name]
	for _, t := range targets {
		if t.kind != "router" {
			continue
		}
		rt := runs[t.name]
		var ratios, cpus []float64
		for i := range min(len(rt), len(ng)) {
			if ng[i].rps > 0 {
				ratios = append(ratios, rt[i].rps/ng[i].rps)
			}
			if ng[i].cpuPerReq > 0 {
				cpus = append(cpus, float64(rt[i].cpuPerReq)/float64(ng[i].cpuPerReq))
			}
		}
		fmt.Fprintf(w, "- %s: throughput ÷ nginx's per round ", t.name)
		for i, r := range ratios {
			if i > 0 {
				fmt.Fprint(w, ", ")
			}
			fmt.Fprintf(w, "%.2f", r)
		}
		slices.Sort(ratios)
		slices.Sort(cpus)
		if len(ratios) > 0 {
			fmt.Fprintf(w, "; median %.2f× (target ≥ 0.9)", ratios[len(ratios)/2])
		}
		if len(cpus) > 0 {
			fmt.Fprintf(w, "; CPU per request ÷ nginx's, median of the rounds %.2f×", cpus[len(cpus)/2])
		}
		fmt.Fprintln(w, ".")
	}
}

type otherRouter struct {
	url  string
	pid  int
	stop func()
}

// startOtherRouter runs another router binary (-router-bin, e.g. an older build) with the
// settings the stack gives its own, in front of the same directory and cells.
func startOtherRouter(bin, dir, directoryURL string) (*otherRouter, error) {
	port, err := pgserver.FreePort()
	if err != nil {
		return nil, err
	}
	internal, err := pgserver.FreePort()
	if err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(dir, "other-router.log"))
	if err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "ROUTER_LISTEN_ADDR="+addr,
		"ROUTER_INTERNAL_ADDR=127.0.0.1:"+strconv.Itoa(internal), "DIRECTORY_DATABASE_URL="+directoryURL)
	cmd.Stdout, cmd.Stderr = logf, logf
	g, err := proc.Start(cmd)
	if err != nil {
		logf.Close()
		return nil, err
	}
	return &otherRouter{url: "http://" + addr, pid: g.Pid(), stop: func() {
		_ = g.Stop(syscall.SIGTERM, 5*time.Second)
		logf.Close()
	}}, nil
}

// postgresCPU is the CPU time of the PostgreSQL server this process started (the stack's) and
// of its backends, those that exited included (the server's children's time, once reaped).
func postgresCPU() time.Duration {
	var total time.Duration
	for _, pid := range children(os.Getpid()) {
		if f := statFields(pid); len(f) > 16 && strings.HasSuffix(f[1], "(postgres)") {
			total += procCPU(pid).total()
			cu, _ := strconv.ParseInt(f[15], 10, 64)
			cs, _ := strconv.ParseInt(f[16], 10, 64)
			total += time.Duration(cu+cs) * clockTick
			for _, c := range children(pid) {
				total += procCPU(c).total()
			}
		}
	}
	return total
}
