// Package proc starts child processes in their own process group and stops them with their
// whole group: the one way the development and test tooling (the private PostgreSQL, the local
// stack, the load tests) runs and ends the processes it starts.
//
// A child gets its own process group, so a terminal's Ctrl-C reaches the parent first and the
// parent stops its children in order, and so that stopping a child also ends what it started
// (PostgreSQL's backends, nginx's workers). The parent-death signal (SIGTERM) stops a child
// whose parent died without cleaning up. It is Linux-only tooling; the renderer's supervisor,
// which must prove a browser's processes gone, has its own stricter machinery.
package proc

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"
)

// Group is a started child process, leader of its own process group.
type Group struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error // cmd.Wait's answer, set before done is closed
}

// Start starts cmd as the leader of a new process group. Credentials set in cmd.SysProcAttr are
// kept. The caller must not call cmd.Wait; Done and Err report the exit.
func Start(cmd *exec.Cmd) (*Group, error) {
	attr := cmd.SysProcAttr
	if attr == nil {
		attr = &syscall.SysProcAttr{}
	}
	attr.Setpgid, attr.Pgid = true, 0
	if attr.Pdeathsig == 0 {
		attr.Pdeathsig = syscall.SIGTERM
	}
	cmd.SysProcAttr = attr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	g := &Group{cmd: cmd, done: make(chan struct{})}
	go func() {
		g.err = cmd.Wait()
		close(g.done)
	}()
	return g, nil
}

// Pid is the leader's process ID (and the group's ID).
func (g *Group) Pid() int { return g.cmd.Process.Pid }

// Done is closed when the leader has exited and been reaped.
func (g *Group) Done() <-chan struct{} { return g.done }

// Err is the leader's exit error (nil for status 0); valid once Done is closed.
func (g *Group) Err() error {
	select {
	case <-g.done:
		return g.err
	default:
		return errors.New("proc: still running")
	}
}

// Exited reports whether the leader has exited.
func (g *Group) Exited() bool {
	select {
	case <-g.done:
		return true
	default:
		return false
	}
}

// Signal sends sig to every process of the group.
func (g *Group) Signal(sig syscall.Signal) error {
	if g.Exited() {
		// The group ID may be reused once the leader is reaped and its group is empty.
		return nil
	}
	err := syscall.Kill(-g.Pid(), sig)
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}

// Pause freezes (SIGSTOP) or thaws (SIGCONT) the whole group, for fault tests.
func (g *Group) Pause(stop bool) error {
	if stop {
		return g.Signal(syscall.SIGSTOP)
	}
	return g.Signal(syscall.SIGCONT)
}

// Stop asks the leader to stop with sig (the group is thawed first, in case it was paused) and
// waits up to grace for it to exit; a leader that is still there then is killed with its whole
// group. A graceful leader ends its own children (PostgreSQL's backends, nginx's workers); the
// group is never signalled after its leader was reaped, since its ID may then be reused. It
// returns an error when the group had to be killed.
func (g *Group) Stop(sig syscall.Signal, grace time.Duration) error {
	if g.Exited() {
		return nil
	}
	_ = g.Signal(syscall.SIGCONT)
	_ = g.cmd.Process.Signal(sig)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-g.done:
		return nil
	case <-t.C:
	}
	_ = syscall.Kill(-g.Pid(), syscall.SIGKILL)
	<-g.done
	return fmt.Errorf("proc: %s did not stop within %v after %v; killed its process group", g.cmd.Path, grace, sig)
}

// State is the one-letter state of process pid from /proc/<pid>/stat ("R", "S", "T" for
// stopped, "Z"…), or an error when the process is gone or the file unreadable.
func State(pid int) (string, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", err
	}
	// The command name in parentheses may hold spaces and parentheses; the state follows the
	// last ')'.
	if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) {
		return string(b[i+2]), nil
	}
	return "", fmt.Errorf("proc: no state in /proc/%d/stat", pid)
}
