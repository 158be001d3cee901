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

	"slidecells/shared/testenv"

	"golang.org/x/sys/unix"

	"slidecells/renderer/internal/unpriv"
)

func TestMain(m *testing.M) {
	RunShimIfRequested()
	if err := BecomeSubreaper(); err != nil {
		panic(err)
	}
	if mount := os.Getenv(unpriv.EnvCgroupV2); mount != "" {
		// The v2 mechanics on a host whose memory, pids and cpu
		// controllers are bound to v1: hugetlb is the one controller
		// the v2 mount has (enabled like the real ones, no limits).
		cgroupMount, v2Controllers = mount, []string{"hugetlb"}
	}
	os.Exit(m.Run())
}

// isolation gives a test its own cgroup parent and user ID lock directory.
// The isolation needs root, or the unprivileged run of TestUnprivileged (in
// CI and on these machines tests run as root).
func isolation(t *testing.T) (*UIDPool, *Cgroups) {
	t.Helper()
	testenv.Need(t, os.Geteuid() == 0 || unpriv.Inside(),
		"the attempt isolation needs root (namespaces, cgroups, per-attempt users), or the unprivileged run TestUnprivileged prepares")
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
	if unpriv.Inside() {
		pool = &UIDPool{First: unpriv.First, Last: unpriv.Last, LockDir: unpriv.LockDir}
	}
	if err := pool.Check(); err != nil {
		t.Fatal(err)
	}
	return pool, cg
}

type run struct {
	pool   *UIDPool
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
	return run{pool: pool, g: g, lines: lines, stdout: out}
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
	// The child counts, in its own /proc, the processes whose environment
	// is empty (an unprivileged supervisor may not read the attempt
	// users' /proc/<pid>/environ on the host).
	r := start(t, `(setsid env -i /bin/sh -c 'trap "" TERM HUP; sleep 300' &) ; (setsid env -i sleep 301 &); sleep 0.2
n=0; for e in /proc/[0-9]*/environ; do if [ "$(wc -c < $e)" = 0 ]; then n=$((n+1)); fi; done
echo "empty=$n"; sleep 300`, nil)
	line := waitLine(t, r)
	pids := hostPIDs(t, r.g)
	if n, _ := strconv.Atoi(strings.TrimPrefix(line, "empty=")); n < 2 || len(pids) < 4 {
		out, _ := exec.Command("ps", "-eo", "pid,ppid,pgid,sid,uid,args").CombinedOutput()
		t.Logf("%s", out)
		t.Fatalf("test setup: expected two helpers with empty environments (child says %q) among %v", line, pids)
	}
	sessions := map[string]bool{}
	for _, p := range pids {
		if stat, err := os.ReadFile("/proc/" + strconv.Itoa(p) + "/stat"); err == nil {
			// Field 6 (after the command in parentheses) is the session.
			f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
			sessions[f[3]] = true
		}
	}
	if len(sessions) < 3 {
		t.Fatalf("test setup: expected the child's session and two new ones, saw %v", sessions)
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
	if n < int(a.pool.First) || n > int(a.pool.Last) || ga != ua || w != "writable" {
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
	// The leader forks its long sleep, then the bomb in one subshell, and then only waits (a
	// builtin): it never forks after the bomb started, so it cannot fail to fork and exit
	// early, and the deadline ends it. (A bare `b` would have the leader fork each element of
	// the pipeline itself, racing the first one's children for the last pids.)
	r := start(t, `sleep 60 & echo up; b() { b | b & }; (b) & wait`, func(s *Spec) {
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

// TestChildHasNoPrivileges: the child runs with no capability in any set,
// no_new_privs and the child's seccomp filter; the filter holds even where
// the child makes itself root of a user namespace of its own (as Chromium's
// sandbox must be allowed to): mounting there is refused.
func TestChildHasNoPrivileges(t *testing.T) {
	r := start(t, `grep -E '^(Cap(Inh|Prm|Eff|Bnd|Amb)|NoNewPrivs|Seccomp):' /proc/self/status
if unshare -Urm sh -c 'mount -t tmpfs none /mnt' 2>/dev/null; then echo nested-mount=allowed; else echo nested-mount=refused; fi
if unshare -Ur true 2>/dev/null; then echo nested-userns=allowed; else echo nested-userns=refused; fi`, nil)
	_, out := r.wait(t)
	for _, want := range []string{
		"CapInh:\t0000000000000000", "CapPrm:\t0000000000000000", "CapEff:\t0000000000000000",
		"CapBnd:\t0000000000000000", "CapAmb:\t0000000000000000", "NoNewPrivs:\t1", "Seccomp:\t2",
		"nested-mount=refused", "nested-userns=allowed",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("want %q in:\n%s", want, out)
		}
	}
}

// TestChildGetsOnlyItsStandardDescriptors: nothing the control process holds
// or inherited reaches the child (not the control socket, not a descriptor
// its own parent leaked to it): ls, started as the child, sees its standard
// descriptors and the one it opened to list them.
func TestChildGetsOnlyItsStandardDescriptors(t *testing.T) {
	leak, err := os.Open("/dev/null")
	if err != nil {
		t.Fatal(err)
	}
	defer leak.Close()
	// A descriptor without close-on-exec, as one inherited from the
	// renderer's own parent would be.
	if _, err := unix.FcntlInt(leak.Fd(), unix.F_SETFD, 0); err != nil {
		t.Fatal(err)
	}
	r := start(t, "", func(s *Spec) { s.Path, s.Args = "/bin/ls", []string{"/proc/self/fd"} })
	_, out := r.wait(t)
	if got := strings.Fields(out); strings.Join(got, " ") != "0 1 2 3" {
		t.Fatalf("the child holds descriptors %v (the leaked one is %d), want 0 1 2 and ls's own 3", got, leak.Fd())
	}
}

// TestModeMatchesPrivileges: as root the child's user is a host user switched
// to directly; unprivileged it is the only ID mapped in a user namespace of
// the attempt's own.
func TestModeMatchesPrivileges(t *testing.T) {
	r := start(t, `id -u; cat /proc/self/uid_map; cat /proc/self/gid_map; readlink /proc/1/ns/user`, nil)
	_, out := r.wait(t)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 {
		t.Fatalf("output:\n%s", out)
	}
	own, _ := os.Readlink("/proc/self/ns/user")
	switch CurrentMode() {
	case ModeRoot:
		if unpriv.Inside() {
			t.Fatal("mode root in the unprivileged run")
		}
		if f := strings.Fields(lines[1]); len(f) != 3 || f[0] != "0" || f[1] != "0" || lines[3] != own {
			t.Fatalf("root mode: the child should be in the host's user namespace %s:\n%s", own, out)
		}
	case ModeUserNamespace:
		id := lines[0]
		for _, m := range lines[1:3] {
			if f := strings.Fields(m); len(f) != 3 || f[0] != id || f[1] != id || f[2] != "1" {
				t.Fatalf("user-namespace mode: want exactly %s mapped to itself:\n%s", id, out)
			}
		}
		if lines[3] == own {
			t.Fatalf("user-namespace mode: the child shares the control process's user namespace %s", own)
		}
	}
}

// TestCgroupLayout: the groups are where the host's hierarchy says: on v2 one
// directory below the renderer's cgroup with the controllers handed down (a
// control process that lived in the delegated cgroup itself moved into its
// "control" leaf to do that); on v1 one directory per hierarchy.
func TestCgroupLayout(t *testing.T) {
	before, _ := ownCgroups()
	_, cg := isolation(t)
	after, _ := ownCgroups()
	var st syscall.Statfs_t
	if err := syscall.Statfs(cgroupMount, &st); err != nil {
		t.Fatal(err)
	}
	if st.Type != unix.CGROUP2_SUPER_MAGIC {
		if cg.v2 || len(cg.dirs) != len(v1Controllers) {
			t.Fatalf("v1 host, groups %+v", cg)
		}
		return
	}
	if !cg.v2 || len(cg.dirs) != 1 || !strings.HasPrefix(cg.dirs[0], cgroupMount+"/") {
		t.Fatalf("v2 at %s, groups %+v", cgroupMount, cg)
	}
	parent := filepath.Dir(cg.dirs[0])
	sub, _ := os.ReadFile(filepath.Join(parent, "cgroup.subtree_control"))
	mine, _ := os.ReadFile(filepath.Join(cg.dirs[0], "cgroup.subtree_control"))
	for _, c := range v2Controllers {
		if !containsWord(string(sub), c) || !containsWord(string(mine), c) {
			t.Fatalf("controller %s not handed down: %s has %q, %s has %q", c, parent, sub, cg.dirs[0], mine)
		}
	}
	if base := strings.TrimSuffix(before[""], "/"+controlLeaf); base != "/" {
		// Not the root cgroup: it may hold no processes and hand down
		// controllers, so the control process left it (once).
		if after[""] != base+"/"+controlLeaf || parent != filepath.Join(cgroupMount, base) {
			t.Fatalf("control process in %s, renderer cgroup in %s; want %s/%s and %s", after[""], parent, base, controlLeaf, base)
		}
	}
}

// supervisorSuite are the tests that run again unprivileged.
var supervisorSuite = []string{
	"TestNaturalExitReleasesEverything", "TestDeadlineKillsGroupThatIgnoresTERM", "TestStopLetsChildCloseWithinGrace",
	"TestEscapeBySetsidAndEmptyEnvironmentIsKilled", "TestLimitsAreInPlaceBeforeInput", "TestEnvironmentIsOnlyWhatWasGiven",
	"TestEachAttemptHasItsOwnUser", "TestFileView", "TestNetworkNamespaceHasNoWayOut", "TestMemoryBombIsContained",
	"TestForkBombIsContained", "TestDiskFillerIsStopped", "TestLeftoversOfAnEarlierEpochAreKilled",
	"TestChildHasNoPrivileges", "TestChildGetsOnlyItsStandardDescriptors", "TestModeMatchesPrivileges", "TestCgroupLayout",
	"TestStandbyCPUIsRaisedWhenAdmitted",
}

// v2Suite are the tests that need no resource controller: the v2
// mechanics (delegation, joining, cgroup.kill, proof of release, leftovers).
var v2Suite = []string{
	"TestNaturalExitReleasesEverything", "TestDeadlineKillsGroupThatIgnoresTERM", "TestEscapeBySetsidAndEmptyEnvironmentIsKilled",
	"TestEachAttemptHasItsOwnUser", "TestFileView", "TestLeftoversOfAnEarlierEpochAreKilled", "TestChildHasNoPrivileges",
	"TestModeMatchesPrivileges", "TestCgroupLayout",
}

// TestUnprivileged runs the supervisor's tests again as an unprivileged
// user (user-namespace mode): a system user with a subordinate ID range,
// newuidmap/newgidmap, and a cgroup delegated to it (the v1 hierarchies
// here, or cgroup v2 where /sys/fs/cgroup is v2). Bombs, escapes, the
// network boundary and the file view must hold exactly as as root.
func TestUnprivileged(t *testing.T) {
	unpriv.RunTests(t, unpriv.Options{}, supervisorSuite...)
}

// hybridV2Mount is the cgroup v2 mount of a hybrid host, or "".
func hybridV2Mount(t *testing.T) string {
	var st syscall.Statfs_t
	if syscall.Statfs("/sys/fs/cgroup", &st) == nil && st.Type == unix.CGROUP2_SUPER_MAGIC {
		testenv.NotHere(t, "/sys/fs/cgroup is cgroup v2: every test of this package runs on v2 already")
	}
	for _, m := range []string{"/sys/fs/cgroup/unified", "/sys/fs/cgroup/v2"} {
		if syscall.Statfs(m, &st) == nil && st.Type == unix.CGROUP2_SUPER_MAGIC {
			return m
		}
	}
	testenv.NotHere(t, "no cgroup v2 mount on this host (cgroup v1 only): the v2 code cannot run here")
	return ""
}

// TestCgroupV2Mechanics: on a hybrid host (cgroup v1 controllers plus a v2
// mount without memory, pids and cpu, which the kernel binds to one
// hierarchy at a time) the v2 code runs with the controller the v2 mount
// has: groups are created and delegated, the shim joins its group, and
// cgroup.kill kills and proves gone what escaped by setsid. The v2 limits
// (memory.max, pids.max, cpu.max) cannot be written here.
func TestCgroupV2Mechanics(t *testing.T) {
	unpriv.RunTestsOnCgroupV2(t, hybridV2Mount(t), v2Suite...)
}

// TestUnprivilegedOnCgroupV2: the same unprivileged, in a cgroup v2
// directory delegated as systemd's Delegate=yes does, in which the
// renderer's control process lives: the supervisor must move itself into a
// leaf to hand the controller to its attempts.
func TestUnprivilegedOnCgroupV2(t *testing.T) {
	mount := hybridV2Mount(t)
	unpriv.RunTests(t, unpriv.Options{V2Mount: mount, Controllers: []string{"hugetlb"}}, v2Suite...)
}
