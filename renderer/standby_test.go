package renderer

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"slidecells/renderer/internal/fixture"
	"slidecells/renderer/internal/rendertest"
	rc "slidecells/shared/rendercontract"
	"slidecells/shared/testenv"
)

// standbyFacts is what the host sees of one slot child: its attempt
// directory, the browser's main process, the user it runs as, its profile
// directory and its cgroups.
type standbyFacts struct {
	dir     string
	pid     int
	uid     int
	profile string
	cgroups []string
}

// waitStandby waits until a standby other than those in seen is ready and
// /readyz says so, and returns what the host sees of it.
func (e *env) waitStandby(seen ...string) standbyFacts {
	e.t.Helper()
	var f standbyFacts
	testenv.Eventually(e.t, 90*time.Second, 50*time.Millisecond, "a ready standby", func() error {
		e.srv.mu.Lock()
		c := e.srv.standby
		ready := c != nil && c.state == childReady
		if ready {
			f.dir = c.g.Dir()
		}
		e.srv.mu.Unlock()
		if !ready {
			return errors.New("no ready standby")
		}
		for _, d := range seen {
			if d == f.dir {
				return errors.New("still the earlier standby")
			}
		}
		st, b, _ := e.do("GET", "/readyz", nil)
		var body struct {
			Standby struct{ State string } `json:"standby"`
		}
		_ = json.Unmarshal(b, &body)
		if st != http.StatusOK || body.Standby.State != "ready" {
			return errors.New("readyz: " + string(b))
		}
		return nil
	})
	name := filepath.Base(f.dir)
	for _, d := range e.srv.cgroups.Dirs() {
		f.cgroups = append(f.cgroups, filepath.Join(d, name))
	}
	// The browser's main process: the one that names the profile below
	// the attempt directory and is no helper (no --type=).
	ents, _ := os.ReadDir("/proc")
	for _, ent := range ents {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil {
			continue
		}
		cmd, _ := os.ReadFile("/proc/" + ent.Name() + "/cmdline")
		args := strings.Split(string(cmd), "\x00")
		var profile string
		helper := false
		for _, a := range args {
			if p, ok := strings.CutPrefix(a, "--user-data-dir="); ok && strings.HasPrefix(p, f.dir+"/") {
				profile = p
			}
			if strings.HasPrefix(a, "--type=") {
				helper = true
			}
		}
		if profile == "" || helper {
			continue
		}
		f.pid, f.profile = pid, profile
		status, _ := os.ReadFile("/proc/" + ent.Name() + "/status")
		for _, l := range strings.Split(string(status), "\n") {
			if v, ok := strings.CutPrefix(l, "Uid:"); ok {
				f.uid, _ = strconv.Atoi(strings.Fields(v)[0])
			}
		}
	}
	if f.pid == 0 || f.uid == 0 {
		e.t.Fatalf("no browser of the standby in %s (pid %d, uid %d)", f.dir, f.pid, f.uid)
	}
	return f
}

// inCgroup tells whether pid is listed in one of the standby's cgroups.
func (f standbyFacts) inCgroup() bool {
	for _, d := range f.cgroups {
		b, err := os.ReadFile(filepath.Join(d, "cgroup.procs"))
		if err == nil && bytes.Contains([]byte("\n"+string(b)), []byte("\n"+strconv.Itoa(f.pid)+"\n")) {
			return true
		}
	}
	return false
}

// assertGone proves the slot child gone from the host: no process of its
// attempt directory, the browser's PID gone, cgroups and directory removed,
// its user's lease released.
func (e *env) assertGone(f standbyFacts) {
	e.t.Helper()
	if left := rendertest.ProcessesUnder(f.dir); len(left) > 0 {
		e.t.Errorf("processes of the used standby survive: %v", left)
	}
	if cmd, err := os.ReadFile("/proc/" + strconv.Itoa(f.pid) + "/cmdline"); err == nil && bytes.Contains(cmd, []byte(f.dir)) {
		e.t.Errorf("the standby's browser %d survives", f.pid)
	}
	for _, d := range f.cgroups {
		if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
			e.t.Errorf("cgroup %s not removed (%v)", d, err)
		}
	}
	if _, err := os.Stat(f.dir); !errors.Is(err, os.ErrNotExist) {
		e.t.Errorf("attempt directory %s not removed (%v)", f.dir, err)
	}
	// The lease is an exclusive flock on the ID's file: free once the
	// file can be locked again.
	fd, err := unix.Open(filepath.Join(e.cfg.ChildUIDs.LockDir, strconv.Itoa(f.uid)), unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		e.t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		e.t.Errorf("user %d still leased: %v", f.uid, err)
	} else {
		_ = unix.Flock(fd, unix.LOCK_UN)
	}
}

// metric returns the value of one series of /metrics, or -1.
func (e *env) metric(series string) float64 {
	e.t.Helper()
	_, m, _ := e.do("GET", "/metrics", nil)
	for _, l := range strings.Split(string(m), "\n") {
		if v, ok := strings.CutPrefix(l, series+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return -1
}

// TestStandbyServesOneAttemptAndIsGone: while the slot is idle the next
// attempt's environment waits, browser started, inside the attempt's
// cgroup limits and as a user of the range, having sent nothing anywhere
// and opened no document. An attempt takes it (warm) and succeeds; after
// the attempt, everything of that standby is gone (processes, cgroup,
// directory, user lease), and the next attempt gets a different browser
// process, profile directory and user.
func TestStandbyServesOneAttemptAndIsGone(t *testing.T) {
	e := setup(t, func(c *Config) { c.noLaunchProbe = false })
	first := e.waitStandby()
	if !first.inCgroup() {
		t.Fatalf("standby browser %d is not in its cgroups %v", first.pid, first.cgroups)
	}
	if first.uid < int(e.cfg.ChildUIDs.First) || first.uid > int(e.cfg.ChildUIDs.Last) {
		t.Fatalf("standby runs as user %d, outside the range", first.uid)
	}
	e.srv.mu.Lock()
	proxy := e.srv.standby.proxy
	e.srv.mu.Unlock()
	// Whatever the idle browser tries on its own is refused by the egress
	// proxy (Chromium asks for a few things at start); nothing is forwarded.
	if proxy == nil || proxy.Admitted() != 0 || e.fx.DocumentHits(fixture.Ready) != 0 {
		t.Fatalf("the standby reached an origin before any attempt took it (proxy %+v)", proxy)
	}

	req := e.request(fixture.Ready, rc.OpPageCapture, small, time.Minute)
	e.mustAccept(req)
	if rec := e.waitFor(req.AttemptID, terminal); rec.Outcome != rc.OutcomeSucceeded || rec.ResourceState != rc.ResourceReleased {
		t.Fatalf("attempt on the standby = %+v %+v", rec, rec.Error)
	}
	if n := e.metric(`renderer_attempt_starts_total{start="warm"}`); n != 1 {
		t.Fatalf("warm attempts = %v, want 1", n)
	}
	e.assertGone(first)

	second := e.waitStandby(first.dir)
	if second.pid == first.pid || second.profile == first.profile || second.uid == first.uid || second.dir == first.dir {
		t.Fatalf("the next standby shares with the used one: %+v and %+v", first, second)
	}
	next := e.request(fixture.Ready, rc.OpPageCapture, small, time.Minute)
	e.mustAccept(next)
	if rec := e.waitFor(next.AttemptID, terminal); rec.Outcome != rc.OutcomeSucceeded {
		t.Fatalf("second attempt = %+v %+v", rec, rec.Error)
	}
	e.assertGone(second)
	if n := e.fx.DocumentHits(fixture.Ready); n != 2 {
		t.Fatalf("document loaded %d times for two attempts", n)
	}
}

// TestStandbyThatDiesIsReplaced: a standby whose browser is killed while it
// waits is reported and replaced before anything takes it; the next attempt
// runs on the replacement.
func TestStandbyThatDiesIsReplaced(t *testing.T) {
	e := setup(t, func(c *Config) { c.noLaunchProbe = false })
	first := e.waitStandby()
	if err := syscall.Kill(first.pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	second := e.waitStandby(first.dir)
	if n := e.metric(`renderer_standby_replacements_total{reason="died"}`); n != 1 {
		t.Fatalf("replacements (died) = %v, want 1", n)
	}
	e.assertGone(first)
	req := e.request(fixture.Ready, rc.OpPageCapture, small, time.Minute)
	e.mustAccept(req)
	if rec := e.waitFor(req.AttemptID, terminal); rec.Outcome != rc.OutcomeSucceeded {
		t.Fatalf("attempt after the replacement = %+v %+v", rec, rec.Error)
	}
	e.assertGone(second)
}

// TestStandbyThatStopsAnsweringIsReplaced: a standby whose browser stops
// answering (stopped by SIGSTOP) fails its check and is replaced.
func TestStandbyThatStopsAnsweringIsReplaced(t *testing.T) {
	e := setup(t, func(c *Config) {
		c.noLaunchProbe = false
		c.standbyCheck = 200 * time.Millisecond
	})
	first := e.waitStandby()
	if err := syscall.Kill(first.pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	e.waitStandby(first.dir)
	if n := e.metric(`renderer_standby_replacements_total{reason="check_failed"}`); n != 1 {
		t.Fatalf("replacements (check_failed) = %v, want 1", n)
	}
	e.assertGone(first)
}

// TestOldStandbyIsRecycled: a standby older than StandbyMaxAge is discarded
// unused and replaced; while the old one is released the slot says busy
// rather than starting a second browser.
func TestOldStandbyIsRecycled(t *testing.T) {
	e := setup(t, func(c *Config) {
		c.noLaunchProbe = false
		c.StandbyMaxAge = 5 * time.Second
	})
	first := e.waitStandby()
	e.waitStandby(first.dir)
	if n := e.metric(`renderer_standby_replacements_total{reason="max_age"}`); n < 1 {
		t.Fatalf("replacements (max_age) = %v, want ≥ 1", n)
	}
	e.assertGone(first)
}

// TestCancelledAttemptDiscardsItsStandby: an attempt cancelled between
// admission and hand-over never gives its standby the job; the standby is
// discarded (never returned to), and the next attempt gets a fresh one.
func TestCancelledAttemptDiscardsItsStandby(t *testing.T) {
	gate := make(chan struct{})
	e := setup(t, func(c *Config) {
		c.noLaunchProbe = false
		c.beforeRun = func() { <-gate }
	})
	first := e.waitStandby()
	req := e.request(fixture.Ready, rc.OpPageCapture, small, time.Minute)
	e.mustAccept(req)
	if st, b := e.cancel(req.AttemptID); st != http.StatusOK {
		t.Fatalf("cancel = %d %s", st, b)
	}
	close(gate)
	if rec := e.waitFor(req.AttemptID, terminal); rec.Outcome != rc.OutcomeCancelled || rec.ResourceState != rc.ResourceReleased {
		t.Fatalf("cancelled attempt = %+v %+v", rec, rec.Error)
	}
	second := e.waitStandby(first.dir)
	e.assertGone(first)
	if e.fx.DocumentHits(fixture.Ready) != 0 {
		t.Fatal("the cancelled attempt's document was opened")
	}
	if second.uid == first.uid {
		t.Fatalf("the next standby has the discarded one's user %d", first.uid)
	}
}

// slotCPU is the CPU cap and weight of a slot group's cgroup, as the kernel
// reports them: cpu.max and cpu.weight on cgroup v2, cpu.cfs_quota_us and
// cpu.shares on v1.
type slotCPU struct{ limit, weight string }

// wantCPU is what slotCPU reads for a cap of cores at a standby's weight
// (the lowest) or an attempt's (the default).
func wantCPU(dirs []string, cores float64, standby bool) slotCPU {
	quota := strconv.Itoa(int(cores * 100000))
	if len(dirs) == 1 { // cgroup v2
		w := map[bool]string{true: "1", false: "100"}[standby]
		return slotCPU{quota + " 100000", w}
	}
	return slotCPU{quota, map[bool]string{true: "2", false: "1024"}[standby]}
}

// groupCPU reads the CPU settings of the cgroup whose directories (one per
// hierarchy) are dirs.
func groupCPU(t *testing.T, dirs []string) slotCPU {
	t.Helper()
	read := func(name string) string {
		for _, d := range dirs {
			if b, err := os.ReadFile(filepath.Join(d, name)); err == nil {
				return strings.TrimSpace(string(b))
			}
		}
		return ""
	}
	if len(dirs) == 1 {
		return slotCPU{read("cpu.max"), read("cpu.weight")}
	}
	return slotCPU{read("cpu.cfs_quota_us"), read("cpu.shares")}
}

// slotGroup is the cgroup directories of the slot's one process group (the
// standby, or the attempt that took it), found below the renderer's cgroup.
func (e *env) slotGroup() []string {
	e.t.Helper()
	var name string
	for _, d := range e.srv.cgroups.Dirs() {
		ents, _ := os.ReadDir(d)
		for _, ent := range ents {
			if ent.IsDir() && ent.Name() != "control" {
				if name != "" && name != ent.Name() {
					e.t.Errorf("more than one group in the slot: %s and %s", name, ent.Name())
				}
				name = ent.Name()
			}
		}
	}
	if name == "" {
		e.t.Fatal("no group in the slot")
	}
	var dirs []string
	for _, d := range e.srv.cgroups.Dirs() {
		dirs = append(dirs, filepath.Join(d, name))
	}
	return dirs
}

// atDocument is the slot's group when the browser opened the attempt's
// document: its cgroup directories and CPU.
type atDocument struct {
	dirs []string
	cpu  slotCPU
}

// cpuAtDocument records the slot's group when the browser opens the
// attempt's document.
func (e *env) cpuAtDocument() chan atDocument {
	seen := make(chan atDocument, 1)
	e.fx.OnDocument(func(string) {
		dirs := e.slotGroup()
		select {
		case seen <- atDocument{dirs, groupCPU(e.t, dirs)}:
		default:
		}
	})
	return seen
}

// TestStandbyWaitsAtLowCPU: a standby waits at the lowest CPU weight under
// RENDER_STANDBY_CPUS; the attempt that takes it opens its document with
// the attempt's CPU (RENDER_CHILD_CPUS, the default weight).
func TestStandbyWaitsAtLowCPU(t *testing.T) {
	e := setup(t, func(c *Config) {
		c.noLaunchProbe = false
		c.StandbyCPUs = 0.25
	})
	first := e.waitStandby()
	if got, want := groupCPU(t, first.cgroups), wantCPU(first.cgroups, 0.25, true); got != want {
		t.Fatalf("waiting standby's CPU = %+v, want %+v", got, want)
	}
	atDocument := e.cpuAtDocument()
	req := e.request(fixture.Ready, rc.OpPageCapture, small, time.Minute)
	e.mustAccept(req)
	if rec := e.waitFor(req.AttemptID, terminal); rec.Outcome != rc.OutcomeSucceeded {
		t.Fatalf("attempt on the standby = %+v %+v", rec, rec.Error)
	}
	if n := e.metric(`renderer_attempt_starts_total{start="warm"}`); n != 1 {
		t.Fatalf("warm attempts = %v, want 1", n)
	}
	got := <-atDocument
	if want := wantCPU(first.cgroups, e.cfg.ChildCgroup.CPUs, false); got.cpu != want || got.dirs[0] != first.cgroups[0] {
		t.Fatalf("attempt's group when its document opened = %+v, want the standby's %v with CPU %+v", got, first.cgroups, want)
	}
}

// TestStandbyTakenWhileStartingGetsFullCPU: an attempt admitted while the
// next standby's group exists but is still starting (its browser launching
// under the standby's cap, the renderer not yet told the group started)
// raises it to the attempt's CPU at once, and opens its document with it.
func TestStandbyTakenWhileStartingGetsFullCPU(t *testing.T) {
	var hold atomic.Bool
	held, gate := make(chan struct{}), make(chan struct{})
	e := setup(t, func(c *Config) {
		c.noLaunchProbe = false
		c.StandbyCPUs = 0.25
		c.afterStart = func() {
			if hold.CompareAndSwap(true, false) {
				close(held)
				<-gate
			}
		}
	})
	release := sync.OnceFunc(func() { close(gate) })
	t.Cleanup(release) // before the renderer's shutdown, should the test fail
	first := e.waitStandby()
	hold.Store(true)
	req := e.request(fixture.Ready, rc.OpPageCapture, small, time.Minute)
	e.mustAccept(req)
	if rec := e.waitFor(req.AttemptID, terminal); rec.Outcome != rc.OutcomeSucceeded {
		t.Fatalf("attempt on the first standby = %+v %+v", rec, rec.Error)
	}
	e.assertGone(first)
	<-held // the next standby's group started; the renderer waits to learn it
	next := e.slotGroup()
	if got, want := groupCPU(t, next), wantCPU(next, 0.25, true); got != want {
		t.Fatalf("starting standby's CPU = %+v, want %+v", got, want)
	}
	atDocument := e.cpuAtDocument()
	second := e.request(fixture.Ready, rc.OpPageCapture, small, time.Minute)
	e.mustAccept(second)
	want := wantCPU(next, e.cfg.ChildCgroup.CPUs, false)
	if got := groupCPU(t, next); got != want {
		t.Fatalf("CPU of the starting standby an attempt took = %+v, want %+v", got, want)
	}
	release()
	if rec := e.waitFor(second.AttemptID, terminal); rec.Outcome != rc.OutcomeSucceeded {
		t.Fatalf("attempt on the starting standby = %+v %+v", rec, rec.Error)
	}
	// It ran in the standby it took, not in a child of its own.
	if got := <-atDocument; got.cpu != want || got.dirs[0] != next[0] {
		t.Fatalf("attempt's group when its document opened = %+v, want the standby's %v with CPU %+v", got, next, want)
	}
}
