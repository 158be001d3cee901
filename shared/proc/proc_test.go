package proc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"slidecells/shared/loop"
	"slidecells/shared/testenv"
)

// startShell starts sh with a child that prints its PID, and returns the group and that PID.
func startShell(t *testing.T, script string) (*Group, int) {
	t.Helper()
	cmd := exec.Command("sh", "-c", script)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	g, err := Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Stop(syscall.SIGKILL, time.Second) })
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(out).ReadString('\n')
		line <- s
	}()
	select {
	case s := <-line:
		pid, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			t.Fatalf("child PID %q: %v", s, err)
		}
		return g, pid
	case <-time.After(10 * time.Second):
		t.Fatal("no child PID within 10s")
	}
	return nil, 0
}

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

func waitGone(t *testing.T, pid int) {
	t.Helper()
	testenv.Eventually(t, 10*time.Second, 10*time.Millisecond, fmt.Sprintf("process %d gone", pid), func() error {
		if alive(pid) {
			return errors.New("alive")
		}
		return nil
	})
}

func TestOwnProcessGroup(t *testing.T) {
	t.Parallel()
	g, _ := startShell(t, `sleep 60 & echo $!; wait`)
	pgid, err := syscall.Getpgid(g.Pid())
	if err != nil || pgid != g.Pid() {
		t.Fatalf("pgid %d (%v), want the leader's PID %d", pgid, err, g.Pid())
	}
	if mine := syscall.Getpgrp(); mine == pgid {
		t.Fatal("the child shares the test's process group")
	}
}

func TestGracefulStop(t *testing.T) {
	t.Parallel()
	g, _ := startShell(t, `trap 'exit 0' TERM; echo 0; while :; do sleep 0.05; done`)
	if err := g.Stop(syscall.SIGTERM, 10*time.Second); err != nil {
		t.Fatalf("graceful stop: %v", err)
	}
	if !g.Exited() || g.Err() != nil {
		t.Fatalf("exited %v, err %v; want a clean exit", g.Exited(), g.Err())
	}
}

// TestStopKillsTheGroupAfterGrace: a leader that ignores the signal is killed with its whole
// group, children included.
func TestStopKillsTheGroupAfterGrace(t *testing.T) {
	t.Parallel()
	g, child := startShell(t, `trap '' TERM; sleep 60 & echo $!; while :; do sleep 0.05; done`)
	start := time.Now()
	if err := g.Stop(syscall.SIGTERM, 200*time.Millisecond); err == nil {
		t.Fatal("a leader ignoring SIGTERM stopped gracefully?")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("stop took %v", d)
	}
	waitGone(t, child)
}

func TestPauseAndStopWhilePaused(t *testing.T) {
	t.Parallel()
	g, child := startShell(t, `sleep 60 & echo $!; wait`)
	if err := g.Pause(true); err != nil {
		t.Fatal(err)
	}
	if st := state(t, child); st != "T" {
		t.Fatalf("child state %q after Pause(true), want T (stopped)", st)
	}
	// Stop thaws the group first, so a paused leader still gets to handle SIGTERM.
	if err := g.Stop(syscall.SIGTERM, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	_ = syscall.Kill(child, syscall.SIGKILL) // sh does not pass SIGTERM on to its sleep
	waitGone(t, child)
}

func TestSignalAfterExitIsANoOp(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("true")
	g, err := Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-g.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("true did not exit within 10s")
	}
	if err := g.Signal(syscall.SIGKILL); err != nil {
		t.Errorf("signal after exit: %v", err)
	}
	if err := g.Stop(syscall.SIGTERM, time.Second); err != nil {
		t.Errorf("stop after exit: %v", err)
	}
}

// state is the one-letter state of a process from /proc/<pid>/stat, once it is "T" (stopped)
// or after five seconds.
func state(t *testing.T, pid int) string {
	t.Helper()
	var s string
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = loop.Until(ctx, 10*time.Millisecond, func(context.Context) error {
		if s, _ = State(pid); s != "T" {
			return errors.New("not stopped")
		}
		return nil
	})
	return s
}
