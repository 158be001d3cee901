// Command loadgen drives a deployment with named scenarios through its router and reports per
// operation (count, errors by code, exact p50/p95/p99, throughput), as a terminal table, a JSON
// report and a self-contained HTML plot of latency over time (see loadtest/load).
//
//	make run                                   # in another terminal
//	go run ./loadtest/loadgen -scenario api    # reads .run/env
//	go run ./loadtest/loadgen -scenario mixed -stack -samples 50
//	make gate / make gate-baseline             # the release gate (-scenario gate -stack)
//
// Scenarios:
//
//	api     reads and writes (workspace and project reads, project lists, project creates with
//	        Idempotency-Key) in -workspaces workspaces per cell, at -rate requests/s (or with
//	        -workers in flight when -rate is 0), for -duration
//	jobs    page-create mutation jobs end to end at -job-rate per second, for -duration
//	render  -samples validations (interactive page.diagnose) and -samples screenshots
//	        (background page.capture), each of a page never rendered before, -concurrency of
//	        each in flight, until both are done
//	mixed   render, with api at -rate and jobs at -job-rate running alongside until it is done
//	gate    mixed with the release gate's fixed settings; -gate FILE compares its interactive
//	        P95 with a baseline, -record-baseline FILE writes one
//
// Targets: with -stack it starts its own deployment (PostgreSQL, directory, -cells cells with
// their renderers, router) in a temporary folder, with the cells' rate limits off, and stops it
// at the end; otherwise it uses the running `make run` deployment named by -env (.run/env),
// whose cells keep their rate limits: the load workspaces get a per-workspace override and one
// token each instead. Only loopback targets are accepted. Every run stops by itself: after
// -duration (api, jobs), or when its samples are done (render, mixed, gate), and never later
// than -max.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"slidecells/deploy/stack"
	"slidecells/loadtest/load"
	"slidecells/shared/directory"
)

type options struct {
	scenario       string
	envFile        string
	ownStack       bool
	cells          int
	bin            string
	duration       time.Duration
	max            time.Duration
	rate           float64
	workers        int
	jobRate        float64
	samples        int
	concurrency    int
	workspaces     int
	out            string
	gate           string
	recordBaseline string
	keep           bool
}

func main() {
	var o options
	flag.StringVar(&o.scenario, "scenario", "api", "api, jobs, render, mixed or gate")
	flag.StringVar(&o.envFile, "env", ".run/env", "the running deployment's env file (make run writes it); ignored with -stack")
	flag.BoolVar(&o.ownStack, "stack", false, "start an own deployment (temporary folder, rate limits off) instead of using make run's")
	flag.IntVar(&o.cells, "cells", 2, "-stack: number of cells")
	flag.StringVar(&o.bin, "bin", "bin", "-stack: folder of the built binaries (make build)")
	flag.DurationVar(&o.duration, "duration", 30*time.Second, "api, jobs: length of the run")
	flag.DurationVar(&o.max, "max", 15*time.Minute, "hard bound of the whole run, set-up included")
	flag.Float64Var(&o.rate, "rate", 100, "api: requests per second in all (open loop); 0 uses -workers")
	flag.IntVar(&o.workers, "workers", 32, "api with -rate 0: requests in flight (closed loop)")
	flag.Float64Var(&o.jobRate, "job-rate", 2, "jobs: page-create jobs submitted per second")
	flag.IntVar(&o.samples, "samples", 50, "render, mixed: validations and screenshots, each")
	flag.IntVar(&o.concurrency, "concurrency", 2, "render, mixed: validations and screenshots in flight, each")
	flag.IntVar(&o.workspaces, "workspaces", 4, "load workspaces per cell")
	flag.StringVar(&o.out, "out", "", "folder for report.json and plot.html (default loadtest/results/<scenario>-<time>)")
	flag.StringVar(&o.gate, "gate", "", "gate: compare with this baseline; exit status 1 when the gate fails")
	flag.StringVar(&o.recordBaseline, "record-baseline", "", "gate: write this run's baseline to this file")
	flag.BoolVar(&o.keep, "keep", false, "-stack: keep the temporary folder (logs)")
	flag.Parse()
	if o.scenario == "gate" {
		gateDefaults(&o)
	}
	code, err := run(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		os.Exit(2)
	}
	os.Exit(code)
}

// gateDefaults fixes what the gate's figures depend on, whatever the flags say: the budget
// (render stage timeout, renderers, cells) and the mixed load.
func gateDefaults(o *options) {
	o.ownStack, o.cells, o.samples, o.concurrency, o.rate, o.jobRate, o.workspaces = true, 2, 200, 2, 20, 1, 4
}

func logf(format string, args ...any) { fmt.Fprintf(os.Stderr, "• "+format+"\n", args...) }

func run(o options) (int, error) {
	switch o.scenario {
	case "api", "jobs", "render", "mixed", "gate":
	default:
		return 0, fmt.Errorf("unknown scenario %q (api, jobs, render, mixed, gate)", o.scenario)
	}
	if (o.gate != "" || o.recordBaseline != "") && o.scenario != "gate" {
		return 0, errors.New("-gate and -record-baseline need -scenario gate")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, o.max)
	defer cancel()
	renders := o.scenario == "render" || o.scenario == "mixed" || o.scenario == "gate"
	settings := map[string]string{}

	var base, dirURL string
	if o.ownStack {
		bin, err := filepath.Abs(o.bin)
		if err != nil {
			return 0, err
		}
		tmp, err := os.MkdirTemp("", "loadgen-")
		if err != nil {
			return 0, err
		}
		_ = os.Chmod(tmp, 0o755) // PostgreSQL runs as its own user when we are root
		if o.keep {
			logf("temporary folder %s (kept)", tmp)
		} else {
			defer os.RemoveAll(tmp)
		}
		var cells []string
		for i := range o.cells {
			cells = append(cells, "cell-"+string(rune('a'+i)))
		}
		cellEnv := []string{"LOG_LEVEL=warn", "CELL_RATE_WORKSPACE=0", "CELL_RATE_TOKEN=0", "RENDER_REQUEST_TIMEOUT_SECONDS=120"}
		logf("starting an own deployment: %d cells%s", o.cells, map[bool]string{true: " with renderers", false: ""}[renders])
		s, err := stack.Start(ctx, stack.Options{Dir: tmp, BinDir: bin, Cells: cells, Renderers: renders,
			Env: map[string][]string{"cell": cellEnv, "renderer": {"LOG_LEVEL=warn"}, "router": {"LOG_LEVEL=warn"}, "preview": {"LOG_LEVEL=warn"}},
			Log: logf})
		if err != nil {
			return 0, err
		}
		defer s.Stop()
		base, dirURL = s.RouterURL, s.DirURL
		settings["deployment"] = "own stack (loadgen -stack)"
		settings["cell_env"] = strings.Join(cellEnv, " ")
		if renders {
			settings["renderers_per_cell"] = strconv.Itoa(stack.RenderersPerCell)
		}
	} else {
		env, err := load.ReadEnvFile(o.envFile)
		if err != nil {
			return 0, fmt.Errorf("%w (start the deployment with make run, or use -stack)", err)
		}
		base, dirURL = env["BASE_URL"], env["DIRECTORY_DATABASE_URL"]
		if base == "" || dirURL == "" {
			return 0, fmt.Errorf("%s lacks BASE_URL or DIRECTORY_DATABASE_URL", o.envFile)
		}
		settings["deployment"] = "make run (" + o.envFile + ")"
		settings["rate_limits"] = "cells' defaults; load workspaces overridden to 100000/s, one token per workspace"
	}
	if err := load.CheckLoopback(base); err != nil {
		return 0, err
	}
	if err := load.CheckLoopbackDatabase(dirURL); err != nil {
		return 0, err
	}
	dir, err := directory.Open(ctx, dirURL)
	if err != nil {
		return 0, err
	}
	defer dir.Close()
	fo := load.FixtureOptions{PerCell: o.workspaces, Log: logf}
	if !o.ownStack {
		fo.RaiseWorkspaceLimits = 100000
	}
	f, err := load.NewFixture(ctx, base, dir, fo)
	if err != nil {
		return 0, err
	}
	defer f.Close(context.WithoutCancel(ctx))
	logf("%d load workspaces on %s, run %s", len(f.Workspaces), strings.Join(f.Cells(), ", "), f.RunID)
	settings["cells"] = strconv.Itoa(len(f.Cells()))
	settings["workspaces_per_cell"] = strconv.Itoa(o.workspaces)

	var attacks []load.Attack
	var validate, shoot []load.Page
	if renders {
		if err := waitRender(ctx, f); err != nil {
			return 0, err
		}
		logf("setup: creating %d pages through mutation jobs (not measured)", 2*o.samples)
		pages, err := f.CreatePages(ctx, 2*o.samples)
		if err != nil {
			return 0, fmt.Errorf("setup: %w", err)
		}
		validate, shoot = pages[:o.samples], pages[o.samples:]
		settings["samples_per_render_op"] = strconv.Itoa(o.samples)
		settings["render_concurrency_per_op"] = strconv.Itoa(o.concurrency)
	}
	rec := load.NewRecorder()
	switch o.scenario {
	case "api":
		attacks = f.APIAttacks(o.rate, o.workers)
	case "jobs":
		attacks = []load.Attack{f.JobAttack(ctx, rec, o.jobRate)}
	case "render":
		attacks = []load.Attack{f.ValidateAttack(validate, o.concurrency), f.ScreenshotAttack(shoot, o.concurrency)}
	case "mixed", "gate":
		attacks = append(f.APIAttacks(o.rate, o.workers), f.JobAttack(ctx, rec, o.jobRate),
			f.ValidateAttack(validate, o.concurrency), f.ScreenshotAttack(shoot, o.concurrency))
	}
	if o.scenario != "render" {
		if o.rate > 0 {
			settings["api_rate_per_s"] = strconv.FormatFloat(o.rate, 'f', -1, 64)
		} else {
			settings["api_workers"] = strconv.Itoa(o.workers)
		}
		settings["job_rate_per_s"] = strconv.FormatFloat(o.jobRate, 'f', -1, 64)
	}
	if o.scenario == "api" {
		delete(settings, "job_rate_per_s")
	}
	if o.scenario == "jobs" {
		delete(settings, "api_rate_per_s")
		delete(settings, "api_workers")
	}
	d := o.duration
	if renders {
		d = time.Until(deadline(ctx)) // the samples decide; -max bounds it
	}
	machine := load.ThisMachine()
	logf("running %s (load average %s); progress every 2 s", o.scenario, machine.LoadAvg)
	start := time.Now()
	took := f.Run(ctx, rec, attacks, d, func(line string) { fmt.Fprintln(os.Stderr, line) })
	samples := rec.Samples()
	r := load.NewReport(o.scenario, start, took, samples)
	r.Commit, r.Target, r.Cells, r.Machine, r.Settings, r.LoadAfter = load.Commit(), base, f.Cells(), machine, settings, load.LoadAverage()
	out := o.out
	if out == "" {
		out = filepath.Join("loadtest", "results", o.scenario+"-"+start.Format("20060102-150405"))
	}
	reportPath, plotPath, err := r.WriteFiles(out, samples)
	if err != nil {
		return 0, err
	}
	fmt.Printf("\n%s: %s, %d cells, measured %.1f s, load average %s → %s\n\n", o.scenario, base, len(r.Cells), took.Seconds(), machine.LoadAvg, r.LoadAfter)
	load.WriteTable(os.Stdout, r.Ops)
	fmt.Printf("\nreport %s\nplot   %s\n", reportPath, plotPath)
	if ctx.Err() != nil && renders {
		fmt.Fprintf(os.Stderr, "loadgen: stopped by -max (%s) or a signal before every sample was taken\n", o.max)
	}
	if o.scenario != "gate" {
		return 0, nil
	}
	return gate(o, r)
}

func deadline(ctx context.Context) time.Time {
	d, _ := ctx.Deadline()
	return d
}

// gate compares the run with the baseline and/or records it as the new baseline.
func gate(o options, r *load.Report) (int, error) {
	rules := load.DefaultGateRules
	fmt.Println()
	if bad := load.CheckRun(r, rules); len(bad) > 0 && o.recordBaseline != "" {
		for _, b := range bad {
			fmt.Println("  ✗", b)
		}
		return 1, errors.New("this run cannot be a baseline")
	}
	if o.recordBaseline != "" {
		if err := load.WriteBaseline(o.recordBaseline, load.BaselineOf(r, rules)); err != nil {
			return 0, err
		}
		fmt.Printf("baseline written to %s (commit it)\n", o.recordBaseline)
	}
	if o.gate == "" {
		return 0, nil
	}
	base, err := load.ReadBaseline(o.gate)
	if err != nil {
		return 0, fmt.Errorf("baseline: %w (record one with make gate-baseline)", err)
	}
	v := load.Compare(base, r, rules)
	fmt.Printf("release gate against %s (recorded %s at %s on %s, load average %s → %s; this run: %s → %s)\n", o.gate,
		base.Recorded.Format(time.DateOnly), base.Commit, base.Machine.Host, base.Machine.LoadAvg, base.LoadEnd, r.Machine.LoadAvg, r.LoadAfter)
	for _, l := range v.Lines {
		fmt.Println("  " + l)
	}
	for _, w := range v.Warnings {
		fmt.Println("  ! " + w)
	}
	for _, f := range v.Failures {
		fmt.Println("  ✗ " + f)
	}
	if !v.Pass {
		fmt.Println("GATE FAILED")
		return 1, nil
	}
	fmt.Println("gate passed")
	return 0, nil
}

// waitRender waits until every cell of the fixture reports render capacity (its health, asked
// through the router with a workspace of that cell), at most 90 s.
func waitRender(ctx context.Context, f *load.Fixture) error {
	byCell := map[string]*load.Workspace{}
	for _, w := range f.Workspaces {
		byCell[w.Cell] = w
	}
	deadline := time.Now().Add(90 * time.Second)
	for cell, w := range byCell {
		for {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, f.Base+"/api/v1/system/health", nil)
			req.Header = w.Header()
			resp, err := f.Client.Do(req)
			if err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if strings.Contains(string(b), `"render":{"status":"ok"`) {
					break
				}
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				return fmt.Errorf("%s never reported render capacity (GET /api/v1/system/health)", cell)
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
	return nil
}
