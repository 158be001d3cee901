// Command benchcheck is the same-run regression check of the key benchmarks (make bench-check):
// it builds a reference commit in a temporary git worktree and the working tree (HEAD with its
// uncommitted changes), runs each benchmark for the reference and then for HEAD, back to back on
// this machine, prints a table (reference, HEAD, ratio) and fails when HEAD is worse than the
// reference by more than the benchmark's tolerance. A comparison that fails is run once more,
// HEAD first this time, and then judged on both runs together (the geometric mean of the two
// ratios): this machine is noisy, and the second of two back-to-back runs can pay, or gain, for
// what the first left behind.
//
//	make build && go run ./loadtest/benchcheck            # full settings, by hand
//	make build && go run ./loadtest/benchcheck -short     # CI settings (a few minutes)
//	go run ./loadtest/benchcheck -ref v1.4.0 -only queue  # another reference, some benchmarks
//
// The reference is -ref, else the last release tag (v*), else the commit in
// loadtest/benchcheck/REFERENCE. The Go benchmark harnesses of the queue and the render dispatch
// (cell/jobs/bench_test.go, cell/render/bench_test.go) are HEAD's in both builds, so that both
// measure the same cases; when HEAD's harness does not compile against the reference, the
// reference's own is used (said in the output). The other benchmarks are each tree's own
// programs (loadtest/idembench, loadtest/routerbench, renderer/cmd/renderbench) and test
// benchmark (cell/compile).
//
// Tolerances (BENCHMARKS.md, "Same-run regression check"): a benchmark fails when HEAD is worse
// than the reference by more than its factor (1.30: HEAD at 1/1.30 = 77 % of the reference's
// throughput, or at 1.30× its time). On these shared 2-core machines a run wobbles by up to about
// ±15 % between back-to-back runs, so 1.30 leaves room for that and still fails a 1.5× regression.
package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"

	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

type options struct {
	ref   string
	short bool
	only  *regexp.Regexp
	keep  bool
	bin   string // HEAD's make build output, for HEAD's preview runtime bundle
}

// tree is one side of the comparison: a source tree and what was built from it.
type tree struct {
	label string // "reference" or "HEAD"
	dir   string // source tree
	out   string // build output folder
	notes []string
}

// metric is one figure a benchmark run reports.
type metric struct {
	name         string
	unit         string
	higherBetter bool
	tolerance    float64 // HEAD may be worse by at most this factor
}

// bench runs in a tree and reports its metrics by name.
type bench struct {
	name    string
	metrics []metric
	needs   []string // binaries on PATH without which the benchmark cannot run here
	cmds    []string // packages of commands it runs (built into the tree's bin)
	tests   []string // packages whose test binary it runs
	run     func(ctx context.Context, t *tree, short bool) (map[string]float64, string, error)
}

func main() {
	var o options
	only := flag.String("only", "", "run only the benchmarks whose name matches this regular expression")
	flag.StringVar(&o.ref, "ref", "", "reference commit or tag (default: the last v* tag, else loadtest/benchcheck/REFERENCE)")
	flag.BoolVar(&o.short, "short", false, "short settings (CI)")
	flag.BoolVar(&o.keep, "keep", false, "keep the temporary worktree and builds")
	flag.StringVar(&o.bin, "bin", "bin", "HEAD's make build output (HEAD's preview runtime bundle is taken from it; the reference builds its own)")
	flag.Parse()
	if *only != "" {
		o.only = regexp.MustCompile(*only)
	}
	ok, err := run(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchcheck:", err)
		os.Exit(2)
	}
	if !ok {
		fmt.Println("\nbench-check: FAILED (HEAD is slower than the reference beyond a tolerance, over both orders)")
		os.Exit(1)
	}
	fmt.Println("\nbench-check: ok")
}

func git(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}

// reference resolves the reference commit.
func reference(root, ref string) (string, string, error) {
	how := "-ref"
	if ref == "" {
		if tag, err := git(root, "describe", "--tags", "--abbrev=0", "--match", "v*"); err == nil && tag != "" {
			ref, how = tag, "last release tag"
		}
	}
	if ref == "" {
		b, err := os.ReadFile(filepath.Join(root, "loadtest/benchcheck/REFERENCE"))
		if err != nil {
			return "", "", fmt.Errorf("no -ref, no release tag and no REFERENCE file: %w", err)
		}
		for line := range strings.Lines(string(b)) {
			if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
				ref, how = strings.Fields(line)[0], "loadtest/benchcheck/REFERENCE"
				break
			}
		}
	}
	commit, err := git(root, "rev-parse", "--verify", ref+"^{commit}")
	if err != nil {
		return "", "", err
	}
	return commit, how, nil
}

func run(o options) (bool, error) {
	root, err := git(".", "rev-parse", "--show-toplevel")
	if err != nil {
		return false, err
	}
	commit, how, err := reference(root, o.ref)
	if err != nil {
		return false, err
	}
	head, _ := git(root, "rev-parse", "--short", "HEAD")
	if dirty, _ := git(root, "status", "--porcelain", "--untracked-files=no"); dirty != "" {
		head += "+changes"
	}
	tmp, err := os.MkdirTemp("", "benchcheck-")
	if err != nil {
		return false, err
	}
	refDir := filepath.Join(tmp, "ref")
	if _, err := git(root, "worktree", "add", "--detach", refDir, commit); err != nil {
		return false, err
	}
	if o.keep {
		fmt.Println("temp dir:", tmp)
	} else {
		defer func() {
			_, _ = git(root, "worktree", "remove", "--force", refDir)
			_ = os.RemoveAll(tmp)
		}()
	}
	fmt.Printf("bench-check: reference %.10s (%s), HEAD %s, short=%v\n", commit, how, head, o.short)

	benches := benchmarks()
	var chosen []bench
	for _, b := range benches {
		if o.only != nil && !o.only.MatchString(b.name) {
			continue
		}
		chosen = append(chosen, b)
	}
	ref := &tree{label: "reference", dir: refDir, out: filepath.Join(tmp, "ref-out")}
	cur := &tree{label: "HEAD", dir: root, out: filepath.Join(tmp, "head-out")}
	// HEAD's harnesses in the reference, where they compile there.
	for _, f := range []string{"cell/jobs/bench_test.go", "cell/render/bench_test.go"} {
		if err := overlay(root, refDir, f); err != nil {
			return false, err
		}
	}
	var cmds, tests []string
	for _, b := range chosen {
		cmds, tests = append(cmds, b.cmds...), append(tests, b.tests...)
	}
	for _, t := range []*tree{ref, cur} {
		start := time.Now()
		if err := build(t, root, o.bin, cmds, tests); err != nil {
			return false, fmt.Errorf("%s build: %w", t.label, err)
		}
		fmt.Printf("built %s in %s\n", t.label, time.Since(start).Round(time.Second))
		for _, n := range t.notes {
			fmt.Println("  note:", n)
		}
	}

	type row struct {
		bench     string
		m         metric
		ref, head float64
		ratio     float64 // HEAD over reference, >1 is better
		ok        bool
		rerun     bool
		first     float64 // the first attempt's ratio, on a rerun
		skipped   string
	}
	var rows []row
	allOK := true
	for _, b := range chosen {
		if miss := missing(b.needs); miss != "" {
			rows = append(rows, row{bench: b.name, skipped: miss + " not found"})
			continue
		}
		var rs, firsts []row
		for attempt := 0; attempt < 2; attempt++ {
			firsts, rs = rs, nil
			measure := func(t *tree) (map[string]float64, string, error) {
				// Each run starts with nothing of the previous run's still to be written back.
				syscall.Sync()
				ctx, cancel := context.WithTimeout(context.Background(), timeout(o.short))
				defer cancel()
				return b.run(ctx, t, o.short)
			}
			// The rerun measures HEAD first: whatever the first run of a pair leaves behind
			// (dirty pages of its database, a warmer or cooler CPU) then favours the other side.
			var rv, hv map[string]float64
			var rlog, hlog string
			var rerr, herr error
			if attempt == 0 {
				rv, rlog, rerr = measure(ref)
				hv, hlog, herr = measure(cur)
			} else {
				hv, hlog, herr = measure(cur)
				rv, rlog, rerr = measure(ref)
			}
			if rerr != nil || herr != nil {
				for _, e := range []struct {
					t   *tree
					err error
					log string
				}{{ref, rerr, rlog}, {cur, herr, hlog}} {
					if e.err != nil {
						fmt.Printf("\n%s on %s failed: %v\n%s\n", b.name, e.t.label, e.err, tail(e.log, 3000))
					}
				}
				return false, fmt.Errorf("%s did not run", b.name)
			}
			failed := false
			for i, m := range b.metrics {
				r, h := rv[m.name], hv[m.name]
				ratio := h / r
				if !m.higherBetter {
					ratio = r / h
				}
				x := row{bench: b.name, m: m, ref: r, head: h, ratio: ratio}
				ratios := []float64{ratio}
				if attempt > 0 {
					x.rerun, x.first = true, firsts[i].ratio
					ratios = append(ratios, x.first)
				}
				x.ok = passes(ratios, m.tolerance)
				failed = failed || !x.ok
				rs = append(rs, x)
			}
			fmt.Printf("%s (attempt %d):", b.name, attempt+1)
			for _, r := range rs {
				fmt.Printf(" %s %.4g→%.4g (%.2f)", r.m.name, r.ref, r.head, r.ratio)
			}
			fmt.Println()
			if !failed {
				break
			}
		}
		for _, r := range rs {
			allOK = allOK && r.ok
		}
		rows = append(rows, rs...)
	}

	fmt.Printf("\n| benchmark | metric | reference %.10s | HEAD %s | HEAD vs reference | tolerance | result |\n|---|---|---:|---:|---:|---:|---|\n", commit, head)
	for _, r := range rows {
		if r.skipped != "" {
			fmt.Printf("| %s | | | | | | skipped: %s |\n", r.bench, r.skipped)
			continue
		}
		res := "ok"
		if !r.ok {
			res = "**WORSE**"
		}
		if r.rerun {
			res += fmt.Sprintf(" (rerun, HEAD first; first attempt %.2f×; both orders %.2f×)", r.first, math.Sqrt(r.ratio*r.first))
		}
		better := "higher is better"
		if !r.m.higherBetter {
			better = "lower is better"
		}
		fmt.Printf("| %s | %s (%s, %s) | %.4g | %.4g | %.2f× | %.2f× | %s |\n", r.bench, r.m.name, r.m.unit, better, r.ref, r.head, r.ratio, r.m.tolerance, res)
	}
	return allOK, nil
}

// passes judges a metric on its ratios (HEAD over reference, >1 is better), one per attempt:
// their geometric mean must not be below 1/tolerance. With one attempt in each order, the mean
// cancels what running second costs or gains.
func passes(ratios []float64, tolerance float64) bool {
	if len(ratios) == 0 {
		return false
	}
	logSum := 0.0
	for _, r := range ratios {
		if !(r > 0) || math.IsInf(r, 0) {
			return false // NaN, 0 or a missing metric
		}
		logSum += math.Log(r)
	}
	return math.Exp(logSum/float64(len(ratios))) >= 1/tolerance
}

// timeout bounds one benchmark run of one tree.
func timeout(short bool) time.Duration {
	if short {
		return 10 * time.Minute
	}
	return 30 * time.Minute
}

func missing(bins []string) string {
	for _, b := range bins {
		if _, err := exec.LookPath(b); err != nil {
			return b
		}
	}
	return ""
}

// overlay copies HEAD's version of a file (as in the working tree) into the reference tree.
func overlay(root, refDir, file string) error {
	b, err := os.ReadFile(filepath.Join(root, file))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(refDir, file), b, 0o644)
}

// build compiles a tree's binaries, its benchmark programs and test binaries into t.out, the
// same way for both trees (-trimpath: the build cache is shared between them).
func build(t *tree, root, headBin string, cmds, tests []string) error {
	bin := filepath.Join(t.out, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		return err
	}
	if len(cmds) > 0 {
		if out, err := goCmd(t.dir, append([]string{"build", "-trimpath", "-o", bin + "/"}, slices.Compact(slices.Sorted(slices.Values(cmds)))...)...); err != nil {
			return fmt.Errorf("%v\n%s", err, tail(out, 3000))
		}
	}
	if err := previewRuntime(t, root, headBin, bin); err != nil {
		return err
	}
	for _, p := range tests {
		exe := filepath.Join(t.out, strings.ReplaceAll(p, "/", "_")+".test")
		out, err := goCmd(t.dir, "test", "-c", "-trimpath", "-o", exe, "./"+p)
		if err != nil && t.label == "reference" && p != "cell/compile" {
			// HEAD's harness does not compile here: the reference's own.
			if _, gerr := git(t.dir, "checkout", "--", p+"/bench_test.go"); gerr != nil {
				return gerr
			}
			t.notes = append(t.notes, fmt.Sprintf("%s: HEAD's bench_test.go does not compile against the reference; its own is used", p))
			out, err = goCmd(t.dir, "test", "-c", "-trimpath", "-o", exe, "./"+p)
		}
		if err != nil {
			return fmt.Errorf("%s: %v\n%s", p, err, tail(out, 3000))
		}
	}
	return nil
}

// previewRuntime puts the tree's preview runtime bundle into bin: HEAD's is make build's; the
// reference's is built by its own preview binary from its own sources, because a preview host
// refuses a bundle made for another host build (rendercontract.PreviewHostBuild), which changes
// with the runtime. The npm packages are HEAD's when the two lock files are the same, else the
// reference's own (npm ci).
func previewRuntime(t *tree, root, headBin, bin string) error {
	if !filepath.IsAbs(headBin) {
		headBin = filepath.Join(root, headBin)
	}
	headRT := filepath.Join(headBin, "preview-runtime")
	if t.label != "reference" {
		if !exists(headRT) {
			return nil
		}
		if out, err := exec.Command("cp", "-a", headRT, bin+"/").CombinedOutput(); err != nil {
			return fmt.Errorf("copy the preview runtime: %v %s", err, out)
		}
		return nil
	}
	const rtDir = "cell/preview/runtime"
	src, preview := filepath.Join(t.dir, rtDir), filepath.Join(bin, "preview")
	if !exists(filepath.Join(src, "src")) || !exists(preview) {
		return nil // no preview host in this comparison
	}
	if mods := filepath.Join(src, "node_modules"); !exists(mods) {
		refLock, _ := os.ReadFile(filepath.Join(src, "package-lock.json"))
		headLock, _ := os.ReadFile(filepath.Join(root, rtDir, "package-lock.json"))
		if headMods := filepath.Join(root, rtDir, "node_modules"); bytes.Equal(refLock, headLock) && exists(headMods) {
			if err := os.Symlink(headMods, mods); err != nil {
				return err
			}
		} else {
			cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund", "--ignore-scripts", "--loglevel=error")
			cmd.Dir = src
			if out, err := cmd.CombinedOutput(); err != nil {
				return fmt.Errorf("npm ci for the reference's preview runtime: %v\n%s", err, tail(string(out), 2000))
			}
		}
	}
	out, err := exec.Command(preview, "build-runtime", "-src", src, "-out", filepath.Join(bin, "preview-runtime")).CombinedOutput()
	if err != nil {
		return fmt.Errorf("the reference's preview runtime: %v\n%s", err, tail(string(out), 2000))
	}
	return nil
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

func goCmd(dir string, args ...string) (string, error) {
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// runIn runs a command of a tree's build in the tree (the programs find testdata, migrations
// and fixtures relative to it) and returns its output.
func runIn(ctx context.Context, t *tree, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = t.dir
	cmd.Env = append(os.Environ(), "SLIDECELLS_BIN="+filepath.Join(t.out, "bin"))
	cmd.WaitDelay = 10 * time.Second
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	err := cmd.Run()
	return buf.String(), err
}

// goBench runs a test binary's benchmarks and reads their metrics: "<sub>:<unit>" → value, for
// every result line (sub is the benchmark name after its first slash, "" when none).
func goBench(ctx context.Context, t *tree, pkg, pattern, benchtime string, short bool, extra ...string) (map[string]float64, string, error) {
	exe := filepath.Join(t.out, strings.ReplaceAll(pkg, "/", "_")+".test")
	args := append([]string{"-test.run", "^$", "-test.bench", pattern, "-test.benchtime", benchtime}, extra...)
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Dir = filepath.Join(t.dir, pkg)
	cmd.Env = os.Environ()
	if short {
		cmd.Env = append(cmd.Env, "SLIDECELLS_BENCH_SHORT=1")
	}
	cmd.WaitDelay = 10 * time.Second
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	err := cmd.Run()
	out := buf.String()
	if err != nil {
		return nil, out, err
	}
	return parseBench(out), out, nil
}

var benchLine = regexp.MustCompile(`^(Benchmark[^\s]+?)(-\d+)?\s+\d+\s+(.*)$`)

func parseBench(out string) map[string]float64 {
	m := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		g := benchLine.FindStringSubmatch(sc.Text())
		if g == nil {
			continue
		}
		sub := ""
		if i := strings.Index(g[1], "/"); i >= 0 {
			sub = g[1][i+1:]
		}
		f := strings.Fields(g[3])
		for i := 0; i+1 < len(f); i += 2 {
			if v, err := strconv.ParseFloat(f[i], 64); err == nil {
				key := f[i+1]
				if sub != "" {
					key = sub + ":" + key
				}
				m[key] = v
			}
		}
	}
	return m
}

// grab reads the first match of re's first group as a number.
func grab(out string, re *regexp.Regexp, key string) (map[string]float64, error) {
	g := re.FindStringSubmatch(out)
	if g == nil {
		return nil, fmt.Errorf("no %q in the output", re.String())
	}
	v, err := strconv.ParseFloat(g[1], 64)
	if err != nil {
		return nil, err
	}
	return map[string]float64{key: v}, nil
}

var (
	idemRatio     = regexp.MustCompile(`throughput ratio with/without idempotency \(medians\): ([0-9.]+)`)
	routerRatio   = regexp.MustCompile(`(?m)^- router[^:]*: throughput ([0-9.]+)× nginx`)
	rendererRatio = regexp.MustCompile(`ratio of medians: ([0-9.]+)`)
)

func benchmarks() []bench {
	return []bench{
		{
			name:  "queue",
			tests: []string{"cell/jobs"},
			metrics: []metric{
				{"nocap:jobs/s", "jobs/s, 1 workspace, no cap", true, 1.30},
				{"capped:jobs/s", "jobs/s, 100 workspaces capped at 2", true, 1.30},
				{"backlog50k:jobs/s", "jobs/s, 50,000-job backlog", true, 1.30},
			},
			run: func(ctx context.Context, t *tree, short bool) (map[string]float64, string, error) {
				return goBench(ctx, t, "cell/jobs", "^BenchmarkNoopJobs$", "1x", short)
			},
		},
		{
			name:    "render-dispatch",
			tests:   []string{"cell/render"},
			metrics: []metric{{"dispatch/s", "dispatches/s", true, 1.30}},
			run: func(ctx context.Context, t *tree, short bool) (map[string]float64, string, error) {
				return goBench(ctx, t, "cell/render", "^BenchmarkDispatch$", "1x", short)
			},
		},
		{
			name:    "idempotency",
			cmds:    []string{"./router/cmd/...", "./cell/cmd/...", "./deploy/cmd/...", "./renderer/cmd/renderer", "./loadtest/idembench"},
			metrics: []metric{{"ratio", "creates/s with keys ÷ without", true, 1.25}},
			run: func(ctx context.Context, t *tree, short bool) (map[string]float64, string, error) {
				args := []string{"-bin", filepath.Join(t.out, "bin"), "-clients", "16"}
				if short {
					args = append(args, "-duration", "3s", "-warmup", "1s", "-rounds", "1")
				}
				out, err := runIn(ctx, t, filepath.Join(t.out, "bin", "idembench"), args...)
				if err != nil {
					return nil, out, err
				}
				m, err := grab(out, idemRatio, "ratio")
				return m, out, err
			},
		},
		{
			name:    "router",
			cmds:    []string{"./loadtest/routerbench"},
			needs:   []string{"nginx"},
			metrics: []metric{{"ratio", "router req/s ÷ nginx req/s", true, 1.30}},
			run: func(ctx context.Context, t *tree, short bool) (map[string]float64, string, error) {
				args := []string{"-only", "^router", "-rate", "0"}
				if short {
					args = append(args, "-duration", "3s", "-warmup", "1s", "-rounds", "1")
				}
				out, err := runIn(ctx, t, filepath.Join(t.out, "bin", "routerbench"), args...)
				if err != nil {
					return nil, out, err
				}
				m, err := grab(out, routerRatio, "ratio")
				return m, out, err
			},
		},
		{
			name:    "renderer",
			cmds:    []string{"./renderer/cmd/renderer", "./renderer/cmd/renderbench"},
			needs:   []string{"chromium"},
			metrics: []metric{{"ratio", "renderer median ÷ cold chromium --screenshot median", false, 1.30}},
			run: func(ctx context.Context, t *tree, short bool) (map[string]float64, string, error) {
				n := "20"
				if short {
					n = "8" // 6 a side gave 0.75× between two builds of the same code on a quiet host
				}
				out, err := runIn(ctx, t, filepath.Join(t.out, "bin", "renderbench"), "-renderer", filepath.Join(t.out, "bin", "renderer"), "-n", n)
				if err != nil {
					return nil, out, err
				}
				m, err := grab(out, rendererRatio, "ratio")
				return m, out, err
			},
		},
		{
			name:    "compile",
			tests:   []string{"cell/compile"},
			metrics: []metric{{"p50-µs", "µs per compile of a 20-component page, p50", false, 1.30}},
			run: func(ctx context.Context, t *tree, short bool) (map[string]float64, string, error) {
				bt := "300x"
				if short {
					bt = "100x"
				}
				return goBench(ctx, t, "cell/compile", "^BenchmarkCompilePage20$", bt, short)
			},
		},
	}
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
