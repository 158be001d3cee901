package supervisor

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	RunShimIfRequested()
	if err := BecomeSubreaper(); err != nil {
		panic(err)
	}
	os.Exit(m.Run())
}

// isolation gives a test its own cgroup parent and user ID lock directory.
// The isolation needs root (in CI and on these machines tests run as root).
func isolation(t *testing.T) (*UIDPool, *Cgroups) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the attempt isolation needs root (namespaces, cgroups, per-attempt users)")
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	cg, err := OpenCgroups("", "slidecells-test-"+hex.EncodeToString(b))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := cg.KillLeftovers(5 * time.Second); err != nil {
			t.Error(err)
		}
		if err := cg.Close(); err != nil {
			t.Error(err)
		}
	})
	pool := &UIDPool{First: DefaultUIDFirst, Last: DefaultUIDLast, LockDir: DefaultUIDLockDir}
	if err := pool.Check(); err != nil {
		t.Fatal(err)
	}
	return pool, cg
}

type run struct {
	g      *Group
	lines  chan string
	stdout chan string
}

// start runs script under sh, isolated, with a minimal environment and
// collects stdout.
func start(t *testing.T, script string, mutate func(*Spec)) run {
	t.Helper()
	pool, cg := isolation(t)
	root, err := os.MkdirTemp("/tmp", "sv")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	spec := Spec{
		Path:         "/bin/sh",
		Args:         []string{"-c", script},
		Env:          func(dir string) []string { return []string{"PATH=/usr/bin:/bin", "HOME=" + dir} },
		UIDs:         pool,
		Cgroups:      cg,
		TempRoot:     root,
		HardDeadline: time.Now().Add(time.Minute),
		Grace:        200 * time.Millisecond,
		ProofTimeout: 5 * time.Second,
	}
	if mutate != nil {
		mutate(&spec)
	}
	g, err := Start(spec)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	out := make(chan string, 1)
	lines := make(chan string, 100)
	go func() {
		var all strings.Builder
		br := bufio.NewReader(g.Stdout())
		for {
			l, err := br.ReadString('\n')
			all.WriteString(l)
			if l != "" {
				lines <- strings.TrimSpace(l)
			}
			if err != nil {
				break
			}
		}
		out <- all.String()
	}()
	t.Cleanup(func() {
		g.Stop(StopSupervise)
		<-g.Done()
	})
	return run{g: g, lines: lines, stdout: out}
}

func (r run) wait(t *testing.T) (Outcome, string) {
	t.Helper()
	select {
	case <-r.g.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("group never released")
	}
	return r.g.Outcome(), <-r.stdout
}

// hostPIDs are the host PIDs of every process of the attempt right now.
func hostPIDs(t *testing.T, g *Group) []int {
	t.Helper()
	p, err := g.cg.Procs()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// assertGone checks that nothing of the attempt is left: none of the given
// host PIDs lives (or lingers as a zombie), the cgroup and the attempt
// directory are removed.
func assertGone(t *testing.T, g *Group, pids []int) {
	t.Helper()
	for _, p := range pids {
		if _, err := os.Stat("/proc/" + strconv.Itoa(p)); err == nil {
			stat, _ := os.ReadFile("/proc/" + strconv.Itoa(p) + "/stat")
			t.Fatalf("process %d of the attempt survived: %s", p, stat)
		}
	}
	for _, d := range g.cg.dirs {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Fatalf("cgroup %s still there: %v", d, err)
		}
	}
	if _, err := os.Stat(g.Dir()); !os.IsNotExist(err) {
		t.Fatalf("attempt directory still there: %v", err)
	}
}

func waitLine(t *testing.T, r run) string {
	t.Helper()
	select {
	case l := <-r.lines:
		return l
	case <-time.After(10 * time.Second):
		t.Fatal("child printed nothing")
	}
	return ""
}

func TestNaturalExitReleasesEverything(t *testing.T) {
	r := start(t, `read x; echo "got $x"; sleep 300 & exit 3`, func(s *Spec) { s.Input = []byte("hello\n") })
	o, out := r.wait(t)
	if strings.TrimSpace(out) != "got hello" {
		t.Fatalf("stdout = %q", out)
	}
	if o.ExitCode != 3 || o.StopReason != "" || o.GraceExpired {
		t.Fatalf("outcome = %+v", o)
	}
	if o.ReleasedAt.IsZero() || r.g.Phase() != PhaseReleased {
		t.Fatal("not released")
	}
	assertGone(t, r.g, nil)
}

func TestDeadlineKillsGroupThatIgnoresTERM(t *testing.T) {
	var phases []Phase
	phaseCh := make(chan Phase, 10)
	r := start(t, `trap "" TERM; sleep 300 & sleep 300 & echo up; wait`, func(s *Spec) {
		s.HardDeadline = time.Now().Add(500 * time.Millisecond)
		s.OnPhase = func(p Phase, _ time.Time) { phaseCh <- p }
	})
	waitLine(t, r)
	pids := hostPIDs(t, r.g)
	o, _ := r.wait(t)
	close(phaseCh)
	for p := range phaseCh {
		phases = append(phases, p)
	}
	if o.StopReason != StopDeadline || !o.GraceExpired || o.Signal != syscall.SIGKILL {
		t.Fatalf("outcome = %+v", o)
	}
	if o.CleanupStartedAt.Sub(o.StopRequestedAt) < 200*time.Millisecond {
		t.Fatalf("group killed before the grace was used up: %+v", o)
	}
	if got := joinPhases(phases); got != "stopping,cleaning,released" {
		t.Fatalf("phases = %s", got)
	}
	if len(pids) < 3 || o.ProcessesReclaimed < 3 {
		t.Fatalf("expected the shell and two sleeps, saw %v, reclaimed %d", pids, o.ProcessesReclaimed)
	}
	assertGone(t, r.g, pids)
}

func TestStopLetsChildCloseWithinGrace(t *testing.T) {
	r := start(t, `trap "echo closing; exit 0" TERM; echo up; sleep 300 & wait`, func(s *Spec) { s.Grace = 10 * time.Second })
	waitLine(t, r)
	r.g.Stop(StopCancel)
	r.g.Stop(StopShutdown) // only the first reason counts
	o, _ := r.wait(t)
	if o.StopReason != StopCancel || o.GraceExpired || o.ExitCode != 0 {
		t.Fatalf("outcome = %+v", o)
	}
	assertGone(t, r.g, nil)
}

// TestEscapeBySetsidAndEmptyEnvironmentIsKilled: a helper that forks twice,
// calls setsid and clears its environment leaves the process group, the
// session and every environment mark; the PID namespace still holds it.
func TestEscapeBySetsidAndEmptyEnvironmentIsKilled(t *testing.T) {
	r := start(t, `(setsid env -i /bin/sh -c 'trap "" TERM HUP; sleep 300' &) ; (setsid env -i sleep 301 &); sleep 0.2; echo up; sleep 300`, nil)
	waitLine(t, r)
	pids := hostPIDs(t, r.g)
	escaped := 0
	for _, p := range pids {
		if env, err := os.ReadFile("/proc/" + strconv.Itoa(p) + "/environ"); err == nil && len(env) == 0 {
			escaped++
		}
	}
	if escaped < 2 {
		for _, d := range r.g.cg.dirs {
			b, _ := os.ReadFile(d + "/cgroup.procs")
			t.Logf("%s: %q", d, b)
		}
		out, _ := exec.Command("ps", "-eo", "pid,ppid,pgid,sid,uid,args").CombinedOutput()
		t.Logf("%s", out)
		t.Fatalf("test setup: expected two helpers with empty environments among %v", pids)
	}
	r.g.Stop(StopCancel)
	r.wait(t)
	assertGone(t, r.g, pids)
}

func TestLimitsAreInPlaceBeforeInput(t *testing.T) {
	r := start(t, `read x; cat /proc/self/limits`, func(s *Spec) {
		s.Input = []byte("go\n")
		s.Limits = Limits{DataBytes: 3 << 30, FileBytes: 7 << 20, OpenFiles: 1000}
	})
	_, out := r.wait(t)
	for _, want := range []string{
		"Max data size             3221225472           3221225472",
		"Max file size             7340032              7340032",
		"Max open files            1000                 1000",
		"Max core file size        0                    0",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("limits miss %q:\n%s", want, out)
		}
	}
}

func TestEnvironmentIsOnlyWhatWasGiven(t *testing.T) {
	t.Setenv("RENDER_SERVICE_CREDENTIAL_FILE", "/secret")
	r := start(t, `env`, nil)
	_, out := r.wait(t)
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		k, _, _ := strings.Cut(l, "=")
		switch k {
		case "PATH", "HOME", "PWD", "SHLVL", "_":
		default:
			t.Fatalf("unexpected variable %s in child environment:\n%s", k, out)
		}
	}
}

// TestEachAttemptHasItsOwnUser: two concurrent attempts run as two
// different unprivileged users of the range, never root.
func TestEachAttemptHasItsOwnUser(t *testing.T) {
	a := start(t, `id -u; id -G; touch "$HOME/x" && echo writable; sleep 300`, nil)
	b := start(t, `id -u; sleep 300`, nil)
	ua, ga, w := waitLine(t, a), waitLine(t, a), waitLine(t, a)
	ub := waitLine(t, b)
	n, _ := strconv.Atoi(ua)
	if n < DefaultUIDFirst || n > DefaultUIDLast || ga != ua || w != "writable" {
		t.Fatalf("child identity = uid %s groups %s (%s)", ua, ga, w)
	}
	if ua == ub {
		t.Fatalf("two concurrent attempts share user %s", ua)
	}
}

// TestFileView: the child sees its own processes only, its own empty temp
// file system, and neither hidden files nor the host's temp root.
func TestFileView(t *testing.T) {
	secretDir := t.TempDir()
	secret := filepath.Join(secretDir, "credential")
	if err := os.WriteFile(secret, []byte("top-secret-credential"), 0o644); err != nil {
		t.Fatal(err)
	}
	var root string
	r := start(t, fmt.Sprintf(`echo "procs=$(ls -d /proc/[0-9]* | wc -l)"; echo "secret=$(cat %s)"; echo "tmp=$(ls -A /tmp | tr '\n' ' ')"; if [ -e $(dirname $HOME)/results-x ]; then echo root=visible; else echo root=hidden; fi; echo "net=$(ls /sys/class/net | tr '\n' ' ')"`, secret), func(s *Spec) {
		s.Hide = []string{secret}
		root = s.TempRoot
	})
	if err := os.WriteFile(filepath.Join(root, "results-x"), []byte("other workspace"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, out := r.wait(t)
	for _, want := range []string{"secret=\n", "root=hidden\n", "net=lo \n"} {
		if !strings.Contains(out, want) {
			t.Errorf("want %q in:\n%s", want, out)
		}
	}
	var procs int
	for _, l := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(l, "procs="); ok {
			procs, _ = strconv.Atoi(strings.TrimSpace(v))
		}
	}
	if procs == 0 || procs > 5 {
		t.Errorf("child sees %d processes, want only its own:\n%s", procs, out)
	}
}

// TestNetworkNamespaceHasNoWayOut: from inside, another loopback port of the
// host, the link-local metadata address and DNS are unreachable; only the
// egress listener the supervisor opened answers.
func TestNetworkNamespaceHasNoWayOut(t *testing.T) {
	host, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	hits := make(chan struct{}, 10)
	go func() {
		for {
			c, err := host.Accept()
			if err != nil {
				return
			}
			hits <- struct{}{}
			c.Close()
		}
	}()
	port := host.Addr().(*net.TCPAddr).Port
	egressHits := make(chan string, 10)
	script := fmt.Sprintf(`
try() { if timeout 3 bash -c "exec 3<>/dev/tcp/$1/$2" 2>/dev/null; then echo "$3=open"; else echo "$3=closed"; fi; }
try 127.0.0.1 %d host-loopback
try 169.254.169.254 80 metadata
try 10.0.0.1 80 private
try 127.0.0.1 3128 egress
if getent hosts example.com >/dev/null 2>&1; then echo dns=resolved; else echo dns=failed; fi
`, port)
	r := start(t, script, func(s *Spec) {
		s.Path = "/bin/bash"
		s.Egress = func(listen func(string, string) (net.Listener, error)) (io.Closer, error) {
			ln, err := listen("tcp", "127.0.0.1:3128")
			if err != nil {
				return nil, err
			}
			go func() {
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					egressHits <- c.RemoteAddr().String()
					c.Close()
				}
			}()
			return ln, nil
		}
	})
	_, out := r.wait(t)
	for _, want := range []string{"host-loopback=closed", "metadata=closed", "private=closed", "egress=open", "dns=failed"} {
		if !strings.Contains(out, want) {
			t.Errorf("want %s in:\n%s", want, out)
		}
	}
	if len(hits) != 0 {
		t.Fatalf("the host's loopback port was reached %d times", len(hits))
	}
	// The connection completed in the kernel before our Accept goroutine counted it: wait for it.
	select {
	case <-egressHits:
	case <-time.After(10 * time.Second):
		t.Fatal("egress listener saw no connection, want 1")
	}
	if n := len(egressHits); n != 0 {
		t.Fatalf("egress listener saw %d connections, want 1", n+1)
	}
}

// TestMemoryBombIsContained: the whole attempt shares one memory limit;
// the kernel kills inside the attempt, the attempt is released and the
// supervisor (this test) is unharmed.
func TestMemoryBombIsContained(t *testing.T) {
	r := start(t, `echo up; awk 'BEGIN { s = "x"; for (;;) s = s s }'; echo "survived $?"`, func(s *Spec) {
		s.CgroupLimits = CgroupLimits{MemoryBytes: 64 << 20}
		s.HardDeadline = time.Now().Add(20 * time.Second)
	})
	o, out := r.wait(t)
	if o.OOMKills < 1 {
		t.Fatalf("no OOM kill inside the attempt (outcome %+v, out %q)", o, out)
	}
	if o.StopReason != "" {
		t.Fatalf("the bomb ran into the deadline instead of the memory limit: %+v", o)
	}
	assertGone(t, r.g, nil)
}

// TestForkBombIsContained: the pids limit stops the bomb, the deadline ends
// the attempt, everything is reclaimed and the host can still fork.
func TestForkBombIsContained(t *testing.T) {
	// The leader forks its long sleep before the bomb and then only waits (a builtin): when the
	// pids limit is reached it cannot fail to fork and exit early, so the deadline ends it.
	r := start(t, `sleep 60 & echo up; b() { b | b & }; b; wait`, func(s *Spec) {
		s.CgroupLimits = CgroupLimits{Processes: 64}
		s.HardDeadline = time.Now().Add(1500 * time.Millisecond)
	})
	waitLine(t, r)
	time.Sleep(500 * time.Millisecond)
	if n := len(hostPIDs(t, r.g)); n > 64 {
		t.Fatalf("%d processes in an attempt limited to 64", n)
	}
	o, _ := r.wait(t)
	if o.StopReason != StopDeadline {
		t.Fatalf("outcome = %+v", o)
	}
	assertGone(t, r.g, nil)
	if out, err := exec.Command("/bin/true").CombinedOutput(); err != nil {
		t.Fatalf("host cannot fork after the bomb: %v %s", err, out)
	}
}

// TestDiskFillerIsStopped: the private temp file system is bounded; the
// filler gets ENOSPC, the host's disk sees nothing of it.
func TestDiskFillerIsStopped(t *testing.T) {
	r := start(t, `dd if=/dev/zero of=$HOME/fill bs=1M count=200 2>&1; echo "size=$(stat -c %s $HOME/fill)"; dd if=/dev/zero of=/tmp/fill2 bs=1M count=10 2>&1`, func(s *Spec) {
		s.TempBytes = 16 << 20
	})
	_, out := r.wait(t)
	if !strings.Contains(out, "No space left on device") {
		t.Fatalf("filler was not stopped:\n%s", out)
	}
	for _, l := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(l, "size="); ok {
			if n, _ := strconv.Atoi(v); n > 16<<20 {
				t.Fatalf("file of %d bytes in a 16 MiB temp file system", n)
			}
		}
	}
	assertGone(t, r.g, nil)
}

// TestLeftoversOfAnEarlierEpochAreKilled: processes left in the renderer's
// cgroup parent by an earlier epoch (here: one that escaped by setsid) are
// killed, and their cgroups removed.
func TestLeftoversOfAnEarlierEpochAreKilled(t *testing.T) {
	_, cg := isolation(t)
	old, err := cg.Create("a-earlier", CgroupLimits{})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("setsid", "sleep", "300")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if err := old.Add(cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	n, err := cg.KillLeftovers(5 * time.Second)
	if err != nil || n != 1 {
		t.Fatalf("KillLeftovers = %d, %v", n, err)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("leftover process not killed")
	}
	if _, err := os.Stat(old.dirs[0]); !os.IsNotExist(err) {
		t.Fatal("leftover cgroup not removed")
	}
}

func TestStartRequiresDeadlineAndIsolation(t *testing.T) {
	if _, err := Start(Spec{Path: "/bin/true", TempRoot: t.TempDir()}); err == nil {
		t.Fatal("started without a hard deadline")
	}
	if _, err := Start(Spec{Path: "/bin/true", TempRoot: t.TempDir(), HardDeadline: time.Now().Add(time.Second)}); err == nil {
		t.Fatal("started without isolation")
	}
}

func joinPhases(ps []Phase) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = string(p)
	}
	return strings.Join(s, ",")
}

// TestMissingCgroupsFailWithWhatIsMissing: without usable cgroups there is
// no weaker mode; the error names what is missing.
func TestMissingCgroupsFailWithWhatIsMissing(t *testing.T) {
	saved := cgroupMount
	defer func() { cgroupMount = saved }()
	cgroupMount = t.TempDir() // not a cgroup file system at all
	_, err := OpenCgroups("", "x")
	if err == nil || !strings.Contains(err.Error(), "memory, pids, cpu, freezer") {
		t.Fatalf("OpenCgroups without cgroups = %v", err)
	}
	var st syscall.Statfs_t
	if syscall.Statfs(filepath.Join(saved, "unified"), &st) == nil && st.Type == 0x63677270 {
		// A cgroup v2 mount without delegated controllers (the hybrid
		// layout of these machines).
		cgroupMount = filepath.Join(saved, "unified")
		_, err := OpenCgroups("", "x")
		if err == nil || !strings.Contains(err.Error(), `controller "memory" is not delegated`) {
			t.Fatalf("OpenCgroups on a v2 mount without controllers = %v", err)
		}
	}
}
