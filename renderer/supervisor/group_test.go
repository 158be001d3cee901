package supervisor

import (
	"bufio"
	"os"
	"os/user"
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

type run struct {
	g      *Group
	lines  chan string
	stdout chan string
}

// start runs script under sh with a minimal environment and collects stdout.
func start(t *testing.T, script string, mutate func(*Spec)) run {
	t.Helper()
	spec := Spec{
		Path:         "/bin/sh",
		Args:         []string{"-c", script},
		Env:          func(dir string) []string { return []string{"PATH=/usr/bin:/bin", "HOME=" + dir} },
		TempRoot:     t.TempDir(),
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

// assertGone checks the process table for anything of the group.
func assertGone(t *testing.T, g *Group) {
	t.Helper()
	left, err := members(g.pgid, g.tag, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Fatalf("processes of the group left: %+v", left)
	}
	if _, err := os.Stat(g.Dir()); !os.IsNotExist(err) {
		t.Fatalf("attempt directory still there: %v", err)
	}
}

func TestNaturalExitReleasesEverything(t *testing.T) {
	r := start(t, `read x; echo "got $x"; sleep 300 & exit 3`, func(s *Spec) { s.Input = []byte("hello\n") })
	// Read the first line before the group is reclaimed.
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
	assertGone(t, r.g)
}

func TestDeadlineKillsGroupThatIgnoresTERM(t *testing.T) {
	var phases []Phase
	phaseCh := make(chan Phase, 10)
	r := start(t, `trap "" TERM; sleep 300 & sleep 300 & echo up; wait`, func(s *Spec) {
		s.HardDeadline = time.Now().Add(300 * time.Millisecond)
		s.OnPhase = func(p Phase, _ time.Time) { phaseCh <- p }
	})
	o, out := r.wait(t)
	close(phaseCh)
	for p := range phaseCh {
		phases = append(phases, p)
	}
	if strings.TrimSpace(out) != "up" {
		t.Fatalf("stdout = %q", out)
	}
	if o.StopReason != StopDeadline || !o.GraceExpired || o.Signal != syscall.SIGKILL {
		t.Fatalf("outcome = %+v", o)
	}
	if !o.StopRequestedAt.Before(o.CleanupStartedAt) || o.CleanupStartedAt.Sub(o.StopRequestedAt) < 200*time.Millisecond {
		t.Fatalf("group killed before the grace was used up: %+v", o)
	}
	if got := joinPhases(phases); got != "stopping,cleaning,released" {
		t.Fatalf("phases = %s", got)
	}
	assertGone(t, r.g)
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
	assertGone(t, r.g)
}

func TestEscapedSessionIsFoundAndReaped(t *testing.T) {
	r := start(t, `setsid sleep 300 & echo $!; wait`, nil)
	pid := waitLine(t, r)
	n, err := strconv.Atoi(pid)
	if err != nil {
		t.Fatalf("pid line %q", pid)
	}
	// setsid runs in the background job; wait until it has left the group.
	for i := 0; ; i++ {
		e, ok := readStat(n)
		if ok && e.pgrp != r.g.pgid {
			break
		}
		if i > 200 {
			t.Fatalf("test setup: helper did not leave the process group: %+v", e)
		}
		time.Sleep(10 * time.Millisecond)
	}
	r.g.Stop(StopCancel)
	r.wait(t)
	if _, err := os.Stat("/proc/" + pid); !os.IsNotExist(err) {
		t.Fatalf("escaped process %s survived (or is an unreaped zombie)", pid)
	}
	assertGone(t, r.g)
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
	var keys []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		k, _, _ := strings.Cut(l, "=")
		keys = append(keys, k)
	}
	got := strings.Join(keys, ",")
	for _, k := range keys {
		switch k {
		case "PATH", "HOME", TagVariable, "PWD", "SHLVL", "_":
		default:
			t.Fatalf("unexpected variable %s in child environment (%s)", k, got)
		}
	}
}

func TestRunsAsUnprivilegedUser(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("dropping to another user needs root")
	}
	u, err := user.Lookup("nobody")
	if err != nil {
		t.Skip("no user nobody")
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	root := t.TempDir()
	// The child user must be able to enter its own directory below root.
	for _, d := range []string{root, filepath.Dir(root)} {
		if err := os.Chmod(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	r := start(t, `id -u; id -G; touch "$HOME/x" && echo writable`, func(s *Spec) {
		s.TempRoot = root
		s.Credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}
	})
	_, out := r.wait(t)
	lines := strings.Fields(out)
	if len(lines) < 3 || lines[0] != u.Uid || lines[1] != u.Gid || lines[2] != "writable" {
		t.Fatalf("child identity/output = %q", out)
	}
}

func TestStartRequiresDeadline(t *testing.T) {
	if _, err := Start(Spec{Path: "/bin/true", TempRoot: t.TempDir()}); err == nil {
		t.Fatal("started without a hard deadline")
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

func joinPhases(ps []Phase) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = string(p)
	}
	return strings.Join(s, ",")
}
