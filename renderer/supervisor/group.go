package supervisor

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

// TagVariable is the environment variable that marks every process of one
// group; its value is random per group.
const TagVariable = "RENDER_ATTEMPT_TAG"

// Defaults for Spec.
const (
	DefaultGrace        = 5 * time.Second
	DefaultProofTimeout = 10 * time.Second
	stderrKeep          = 16 << 10
)

// StopReason says why the supervisor stopped a group. Empty means the child
// exited on its own.
type StopReason string

// Stop reasons.
const (
	StopDeadline  StopReason = "deadline"
	StopCancel    StopReason = "cancel"
	StopShutdown  StopReason = "shutdown"
	StopSupervise StopReason = "supervisor"
)

// Phase is where a group is in its life.
type Phase string

// Phases, in order. Unreleased may precede Released when proof is slow.
const (
	PhaseRunning    Phase = "running"
	PhaseStopping   Phase = "stopping"
	PhaseCleaning   Phase = "cleaning"
	PhaseUnreleased Phase = "unreleased"
	PhaseReleased   Phase = "released"
)

// Spec describes one child process group.
type Spec struct {
	// Path and Args are the child's program and arguments (Args without
	// the program name). Never put secrets in Args: /proc shows them to
	// every user.
	Path string
	Args []string
	// Env builds the complete child environment from the attempt
	// directory; nothing of the supervisor's own environment is passed
	// on unless Env returns it. TagVariable is added.
	Env func(dir string) []string
	// Credential, when set, runs the child under another user. The
	// attempt directory is handed to that user.
	Credential *syscall.Credential
	// TempRoot is where the attempt directory is created.
	TempRoot string
	Limits   Limits
	// Input is written to the child's standard input after the limits are
	// in place, then standard input is closed. Secrets travel here.
	Input []byte
	// HardDeadline is when the supervisor stops the group on its own. It
	// should carry a monotonic reading (time.Now().Add(d)), so wall-clock
	// jumps do not move it.
	HardDeadline time.Time
	// Grace is how long the child may take to close after it was asked
	// to; zero means DefaultGrace.
	Grace time.Duration
	// ProofTimeout is how long the supervisor keeps killing and checking
	// before it reports the group unreleased (it keeps trying after
	// that); zero means DefaultProofTimeout.
	ProofTimeout time.Duration
	// OnPhase, if set, is called on every phase change, from the
	// supervisor's goroutine; it must not block.
	OnPhase func(Phase, time.Time)
	// Log receives operational lines; nil discards them.
	Log *zap.Logger
}

// Outcome is what happened to a group. It is complete once Done is closed.
type Outcome struct {
	// ExitCode is the child's exit status, or -1 when a signal ended it.
	ExitCode int
	// Signal is the signal that ended the child, if any.
	Signal syscall.Signal
	// StopReason is set when the supervisor stopped the child.
	StopReason      StopReason
	StopRequestedAt time.Time
	LeaderExitedAt  time.Time
	// GraceExpired is true when the child did not exit within the grace
	// and was killed with its group.
	GraceExpired       bool
	CleanupStartedAt   time.Time
	ReleasedAt         time.Time
	ProcessesReclaimed int
	// Stderr is the tail of the child's standard error, unredacted: the
	// caller must redact before logging.
	Stderr string
}

// Group is one running child process group.
type Group struct {
	spec   Spec
	log    *zap.Logger
	dir    string
	tag    []byte
	cmd    *exec.Cmd
	pgid   int
	stdout *os.File
	stderr *tailBuffer

	// seen remembers processes found by tag; only the supervise
	// goroutine touches it.
	seen map[procKey]bool

	stopCh   chan StopReason
	stopOnce sync.Once
	done     chan struct{}

	mu      sync.Mutex
	outcome Outcome
	phase   Phase
}

// Start creates the attempt directory, starts the child in its own process
// group, applies the limits, hands over the input and begins supervising.
func Start(spec Spec) (*Group, error) {
	if spec.Grace <= 0 {
		spec.Grace = DefaultGrace
	}
	if spec.ProofTimeout <= 0 {
		spec.ProofTimeout = DefaultProofTimeout
	}
	if spec.HardDeadline.IsZero() {
		return nil, errors.New("supervisor: a hard deadline is required")
	}
	log := spec.Log
	if log == nil {
		log = zap.NewNop()
	}
	dir, err := os.MkdirTemp(spec.TempRoot, "a-")
	if err != nil {
		return nil, fmt.Errorf("supervisor: attempt directory: %w", err)
	}
	fail := func(err error) (*Group, error) {
		os.RemoveAll(dir)
		return nil, err
	}
	if spec.Credential != nil {
		if err := os.Chown(dir, int(spec.Credential.Uid), int(spec.Credential.Gid)); err != nil {
			return fail(fmt.Errorf("supervisor: hand attempt directory to child user: %w", err))
		}
	}
	tagValue := make([]byte, 16)
	if _, err := rand.Read(tagValue); err != nil {
		return fail(err)
	}
	tag := TagVariable + "=" + hex.EncodeToString(tagValue)

	var env []string
	if spec.Env != nil {
		env = spec.Env(dir)
	}
	self, err := os.Executable()
	if err != nil {
		return fail(fmt.Errorf("supervisor: own executable for the exec shim: %w", err))
	}
	cmd := exec.Command(self)
	cmd.Args = shimArgs(spec.Credential, spec.Limits, spec.Path, append([]string{spec.Path}, spec.Args...))
	cmd.Env = append(env, tag)
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Setpgid: true,
		// If the supervisor dies without stopping the child, the
		// kernel kills it (the shim re-arms this after dropping
		// privileges); the browser's own parent-death signal then
		// takes the browser.
		Pdeathsig: syscall.SIGKILL,
	}
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		return fail(err)
	}
	stdoutR, stdoutW, err := os.Pipe()
	if err != nil {
		stdinR.Close()
		stdinW.Close()
		return fail(err)
	}
	stderrR, stderrW, err := os.Pipe()
	if err != nil {
		stdinR.Close()
		stdinW.Close()
		stdoutR.Close()
		stdoutW.Close()
		return fail(err)
	}
	// Pipes as *os.File, not io.Writers: exec.Cmd.Wait would otherwise
	// wait for every process holding a copy of the write end, and an
	// escaped helper could hold it forever.
	cmd.Stdin = stdinR
	cmd.Stdout = stdoutW
	cmd.Stderr = stderrW
	if err := cmd.Start(); err != nil {
		for _, f := range []*os.File{stdinR, stdinW, stdoutR, stdoutW, stderrR, stderrW} {
			f.Close()
		}
		return fail(fmt.Errorf("supervisor: start child: %w", err))
	}
	// The child holds its own copies now; ours would keep the pipes open
	// past the child's exit.
	stdinR.Close()
	stdoutW.Close()
	stderrW.Close()
	stderr := &tailBuffer{max: stderrKeep}
	go func() {
		_, _ = io.Copy(stderr, stderrR)
		stderrR.Close()
	}()

	g := &Group{
		spec:   spec,
		log:    log,
		dir:    dir,
		tag:    []byte(tag),
		cmd:    cmd,
		pgid:   cmd.Process.Pid,
		stdout: stdoutR,
		stderr: stderr,
		seen:   make(map[procKey]bool),
		stopCh: make(chan StopReason, 1),
		done:   make(chan struct{}),
		phase:  PhaseRunning,
	}
	leaderDone := make(chan struct{})
	go func() {
		err := cmd.Wait()
		g.recordExit(err)
		close(leaderDone)
	}()

	setOOMScore(g.pgid)
	go func() {
		if len(spec.Input) > 0 {
			if _, err := stdinW.Write(spec.Input); err != nil {
				g.log.Warn("child input not fully written", zap.Error(err))
			}
		}
		stdinW.Close()
	}()
	go g.supervise(leaderDone)
	return g, nil
}

// Dir is the attempt directory, owned by the child user. It is removed
// before the group is reported released.
func (g *Group) Dir() string { return g.dir }

// Stdout is the child's standard output. It reaches EOF when the child
// exits. The caller must read it, or the child blocks on a full pipe.
func (g *Group) Stdout() io.Reader { return g.stdout }

// Stop marks the group stopped and starts the stop sequence: SIGTERM to the
// child, then, after the grace, SIGKILL to the whole group. Only the first
// call counts; it never blocks.
func (g *Group) Stop(reason StopReason) {
	g.stopOnce.Do(func() { g.stopCh <- reason })
}

// Done is closed once every process of the group is proven gone, reaped,
// and the attempt directory is removed.
func (g *Group) Done() <-chan struct{} { return g.done }

// Outcome returns the outcome; complete after Done.
func (g *Group) Outcome() Outcome {
	g.mu.Lock()
	defer g.mu.Unlock()
	o := g.outcome
	o.Stderr = g.stderr.String()
	return o
}

// Phase returns the current phase.
func (g *Group) Phase() Phase {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.phase
}

func (g *Group) setPhase(p Phase) {
	now := time.Now()
	g.mu.Lock()
	g.phase = p
	g.mu.Unlock()
	if g.spec.OnPhase != nil {
		g.spec.OnPhase(p, now)
	}
}

func (g *Group) recordExit(err error) {
	now := time.Now()
	g.mu.Lock()
	defer g.mu.Unlock()
	g.outcome.LeaderExitedAt = now
	g.outcome.ExitCode = g.cmd.ProcessState.ExitCode()
	if ws, ok := g.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		g.outcome.Signal = ws.Signal()
	}
	_ = err
}

func (g *Group) supervise(leaderDone <-chan struct{}) {
	defer close(g.done)
	defer g.stdout.Close()
	timer := time.NewTimer(time.Until(g.spec.HardDeadline))
	defer timer.Stop()

	var reason StopReason
	select {
	case <-leaderDone:
	case <-timer.C:
		reason = StopDeadline
	case reason = <-g.stopCh:
	}
	if reason != "" {
		g.mu.Lock()
		g.outcome.StopReason = reason
		g.outcome.StopRequestedAt = time.Now()
		g.mu.Unlock()
		g.setPhase(PhaseStopping)
		// Ask the child to close its browser itself; it knows how to
		// do that without leaving half-written files.
		_ = unix.Kill(g.pgid, unix.SIGTERM)
		grace := time.NewTimer(g.spec.Grace)
		select {
		case <-leaderDone:
			grace.Stop()
		case <-grace.C:
			g.mu.Lock()
			g.outcome.GraceExpired = true
			g.mu.Unlock()
			g.log.Warn("child did not close within the grace; killing its process group",
				zap.Int("pgid", g.pgid), zap.Duration("grace", g.spec.Grace))
		}
	}
	g.mu.Lock()
	g.outcome.CleanupStartedAt = time.Now()
	g.mu.Unlock()
	g.setPhase(PhaseCleaning)
	// Whether the child exited by itself or not, its helpers may live on
	// in the group; the whole group goes.
	_ = unix.Kill(-g.pgid, unix.SIGKILL)
	<-leaderDone

	deadline := time.Now().Add(g.spec.ProofTimeout)
	reported := false
	wait := 5 * time.Millisecond
	for {
		n, err := g.reclaim()
		if err == nil && n == 0 {
			if rmErr := os.RemoveAll(g.dir); rmErr == nil {
				break
			} else if !reported {
				g.log.Error("attempt directory not removed", zap.Error(rmErr))
			}
		}
		if !reported && time.Now().After(deadline) {
			reported = true
			g.log.Error("process group not proven gone; slot stays occupied", zap.Int("pgid", g.pgid), zap.Int("left", n), zap.Error(err))
			g.setPhase(PhaseUnreleased)
		}
		time.Sleep(wait)
		if wait < time.Second {
			wait *= 2
		}
	}
	g.mu.Lock()
	g.outcome.ReleasedAt = time.Now()
	g.mu.Unlock()
	g.setPhase(PhaseReleased)
}

// reclaim kills and reaps what is left of the group and returns how many
// processes it still found.
func (g *Group) reclaim() (int, error) {
	_ = unix.Kill(-g.pgid, unix.SIGKILL)
	left, err := members(g.pgid, g.tag, g.seen)
	if err != nil {
		return -1, err
	}
	self := os.Getpid()
	for _, p := range left {
		if !p.zombie {
			_ = unix.Kill(p.pid, unix.SIGKILL)
		}
	}
	// Reap orphans of the group that were re-parented to us.
	for {
		pid, err := unix.Wait4(-g.pgid, nil, unix.WNOHANG, nil)
		if pid <= 0 || err != nil {
			break
		}
		g.countReclaimed()
	}
	for _, p := range left {
		if p.pgrp != g.pgid && (p.ppid == self || p.zombie) {
			if pid, _ := unix.Wait4(p.pid, nil, unix.WNOHANG, nil); pid > 0 {
				g.countReclaimed()
			}
		}
	}
	return len(left), nil
}

func (g *Group) countReclaimed() {
	g.mu.Lock()
	g.outcome.ProcessesReclaimed++
	g.mu.Unlock()
}

// tailBuffer keeps the last max bytes written.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.max {
		t.buf = append([]byte(nil), t.buf[len(t.buf)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
