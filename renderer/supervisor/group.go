package supervisor

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

// Defaults for Spec.
const (
	DefaultGrace        = 5 * time.Second
	DefaultProofTimeout = 10 * time.Second
	DefaultTempBytes    = 512 << 20
	// shimTimeout bounds the set-up of the namespaces by the shim.
	shimTimeout = 15 * time.Second
	stderrKeep  = 16 << 10
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
	// StopDiscard: a group prepared ahead of its attempt (a standby) is
	// discarded unused (recycled, replaced, or its attempt ended before
	// taking it).
	StopDiscard StopReason = "discard"
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

// Spec describes one attempt's child.
type Spec struct {
	// Path and Args are the child's program and arguments (Args without
	// the program name). Never put secrets in Args: /proc shows them to
	// every user.
	Path string
	Args []string
	// Env builds the complete child environment from the attempt
	// directory; nothing of the supervisor's own environment is passed
	// on unless Env returns it.
	Env func(dir string) []string
	// UIDs leases the attempt's own unprivileged user; required.
	UIDs *UIDPool
	// Cgroups is where the attempt's cgroup is created; required.
	Cgroups      *Cgroups
	CgroupLimits CgroupLimits
	// Standby, when set, creates the cgroup at the standby's CPU (its
	// cap, the lowest weight) until Standby.Admit raises it to
	// CgroupLimits.CPUs at the default weight. Nil: the attempt's CPU
	// from the start.
	Standby *StandbyCPU
	// TempRoot is where the attempt directory is created. In the child's
	// view it lies on the attempt's private temp file system.
	TempRoot string
	// TempBytes bounds the private temp file system (/tmp, the attempt
	// directory and /dev/shm together); zero means DefaultTempBytes.
	TempBytes uint64
	// Hide lists files and folders the child must not see (credentials,
	// keys); its mount namespace covers them.
	Hide []string
	// Limits are per-process limits on top of the cgroup.
	Limits Limits
	// Egress, when set, is called once the child's network namespace
	// exists and before the child runs. listen opens a listener whose
	// address is in the child's namespace (its only way out) while the
	// socket stays with the supervisor. The returned closer is closed
	// once the group is released.
	Egress func(listen func(network, addr string) (net.Listener, error)) (io.Closer, error)
	// Input is written to the child's standard input once it runs, then
	// standard input is closed. Secrets travel here.
	Input []byte
	// HoldInput keeps standard input open after Input: the group is
	// prepared ahead of its attempt (a standby), and Bind hands over the
	// rest of the input, the attempt's deadline and its observers once an
	// attempt takes it. Until then HardDeadline bounds the prepared group.
	HoldInput bool
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
	GraceExpired     bool
	CleanupStartedAt time.Time
	ReleasedAt       time.Time
	// ProcessesReclaimed counts the processes still in the attempt's
	// cgroup when cleanup began.
	ProcessesReclaimed int
	// OOMKills counts processes the kernel killed at the memory limit.
	OOMKills int
	// Isolation is what setting up the boundary cost.
	Isolation IsolationTimes
	// Stderr is the tail of the child's standard error, unredacted: the
	// caller must redact before logging.
	Stderr string
}

// IsolationTimes are the per-stage costs of one attempt's isolation.
type IsolationTimes struct {
	// Cgroup: creating the cgroup and writing its limits.
	Cgroup time.Duration
	// Namespaces: cloning the shim into its new namespaces, and the
	// shim's set-up of the file view and loopback up to its report.
	Namespaces time.Duration
	// IDMap: writing the user and group ID maps of the attempt's user
	// namespace through newuidmap and newgidmap (user-namespace mode
	// only).
	IDMap time.Duration
	// Join: moving the shim into the cgroup.
	Join time.Duration
	// Egress: opening the egress listener in the network namespace and
	// starting its server.
	Egress time.Duration
}

// Group is one attempt's child and everything it started.
type Group struct {
	spec   Spec
	log    *zap.Logger
	dir    string
	cmd    *exec.Cmd
	pid    int
	cg     *Cgroup
	lease  *Lease
	egress io.Closer
	ctl    *shimControl
	stdout *os.File
	stderr *tailBuffer

	stopCh   chan StopReason
	stopOnce sync.Once
	done     chan struct{}
	// bindInput and deadlineCh carry Bind's input and hard deadline to
	// the input writer and the supervising goroutine.
	bindInput  chan []byte
	deadlineCh chan time.Time

	mu      sync.Mutex
	outcome Outcome
	phase   Phase
	bound   bool
	onPhase func(Phase, time.Time)
}

// Start leases a user, creates the attempt's cgroup, starts the exec shim in
// new PID, network, mount and IPC namespaces (and a new user namespace when
// unprivileged, whose ID map it then writes), moves the shim into the
// cgroup, waits until the shim has built the file view, opens the egress
// path, lets the child run, hands over the input and begins supervising.
// Any failure undoes all of it.
func Start(spec Spec) (*Group, error) {
	if spec.Grace <= 0 {
		spec.Grace = DefaultGrace
	}
	if spec.ProofTimeout <= 0 {
		spec.ProofTimeout = DefaultProofTimeout
	}
	if spec.TempBytes == 0 {
		spec.TempBytes = DefaultTempBytes
	}
	spec.Limits = spec.Limits.WithDefaults()
	if spec.HardDeadline.IsZero() {
		return nil, errors.New("supervisor: a hard deadline is required")
	}
	if spec.UIDs == nil || spec.Cgroups == nil {
		return nil, errors.New("supervisor: a user ID pool and cgroups are required; there is no unisolated mode")
	}
	log := spec.Log
	if log == nil {
		log = zap.NewNop()
	}
	userNS := CurrentMode() == ModeUserNamespace
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("supervisor: own executable for the exec shim: %w", err)
	}
	lease, err := spec.UIDs.Acquire()
	if err != nil {
		return nil, err
	}
	// The host keeps an empty placeholder of the attempt directory, so
	// names stay unique; the child's directory of the same name lives on
	// its private temp file system.
	dir, err := os.MkdirTemp(spec.TempRoot, "a-")
	if err != nil {
		lease.Release()
		return nil, fmt.Errorf("supervisor: attempt directory: %w", err)
	}
	var iso IsolationTimes
	t0 := time.Now()
	var cg *Cgroup
	if spec.Standby != nil {
		cg, err = spec.Standby.create(spec.Cgroups, filepath.Base(dir), spec.CgroupLimits)
	} else {
		cg, err = spec.Cgroups.Create(filepath.Base(dir), spec.CgroupLimits)
	}
	if err != nil {
		lease.Release()
		os.RemoveAll(dir)
		return nil, err
	}
	iso.Cgroup = time.Since(t0)
	var files []*os.File
	var ctl *shimControl
	undo := func(err error) (*Group, error) {
		for _, f := range files {
			f.Close()
		}
		if ctl != nil {
			ctl.Close()
		}
		_, _ = cg.killUntilEmpty(time.Now().Add(2 * time.Second))
		_ = cg.Remove()
		lease.Release()
		os.RemoveAll(dir)
		return nil, err
	}
	pipe := func() (*os.File, *os.File, error) {
		r, w, err := os.Pipe()
		if err == nil {
			files = append(files, r, w)
		}
		return r, w, err
	}
	stdinR, stdinW, err1 := pipe()
	stdoutR, stdoutW, err2 := pipe()
	stderrR, stderrW, err3 := pipe()
	ctlParent, ctlChild, err4 := socketPair()
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return undo(err)
	}
	files = append(files, ctlParent, ctlChild)
	var env []string
	if spec.Env != nil {
		env = spec.Env(dir)
	}
	cmd := exec.Command(self)
	cmd.Args = shimArgs(shimConfig{
		UID: lease.UID, UserNS: userNS, Limits: spec.Limits, TempRoot: spec.TempRoot, AttemptDir: dir, TempBytes: spec.TempBytes,
		Hide: spec.Hide, Target: spec.Path, Argv: append([]string{spec.Path}, spec.Args...),
	})
	cmd.Env = env
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Setpgid:    true,
		Cloneflags: syscall.CLONE_NEWPID | syscall.CLONE_NEWNET | syscall.CLONE_NEWNS | syscall.CLONE_NEWIPC,
		// If the supervisor dies without stopping the child, the kernel
		// kills the namespace's init, and with it every process of the
		// namespace (the shim re-arms this after every credential
		// change).
		Pdeathsig: syscall.SIGKILL,
	}
	if userNS {
		// A process in a new user namespace has every capability there
		// until it executes a program as a user that is not the
		// namespace's root; ambient capabilities carry the ones the
		// shim needs across its own exec. They count in the attempt's
		// namespaces only, and the shim drops them all before the
		// child runs.
		cmd.SysProcAttr.Cloneflags |= syscall.CLONE_NEWUSER
		cmd.SysProcAttr.AmbientCaps = shimCapabilities
	}
	// Pipes as *os.File, not io.Writers: exec.Cmd.Wait would otherwise
	// wait for every process holding a copy of the write end.
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdinR, stdoutW, stderrW
	cmd.ExtraFiles = []*os.File{ctlChild}
	t0 = time.Now()
	if err := cmd.Start(); err != nil {
		return undo(fmt.Errorf("supervisor: start child in new namespaces: %w%s", err, userNamespaceHint(err)))
	}
	// The child holds its own copies now.
	for _, f := range []*os.File{stdinR, stdoutW, stderrW, ctlChild} {
		f.Close()
	}
	files = []*os.File{stdinW, stdoutR, stderrR}
	pid := cmd.Process.Pid
	ctl, err = newShimControl(ctlParent)
	if err != nil {
		_ = unix.Kill(pid, unix.SIGKILL)
		_ = cmd.Wait()
		return undo(err)
	}
	kill := func(err error) (*Group, error) {
		// A shim that failed on its own said why before it exited.
		if msg, _, rerr := ctl.recv(20 * time.Millisecond); rerr == nil && strings.HasPrefix(msg, "error: ") {
			err = fmt.Errorf("%w (shim: %s)", err, strings.TrimPrefix(msg, "error: "))
		}
		_ = unix.Kill(pid, unix.SIGKILL)
		_ = cmd.Wait()
		return undo(err)
	}
	iso.Namespaces = time.Since(t0)
	if userNS {
		t1 := time.Now()
		if err := mapIDs(pid, lease.UID); err != nil {
			return kill(err)
		}
		iso.IDMap = time.Since(t1)
	}
	// Into the cgroup before the shim does anything: everything it and
	// the child do is charged to the attempt. (Unprivileged on cgroup
	// v1, moving a process needs its user to be the mover's, which the
	// shim's is until it becomes the attempt's user.)
	t1 := time.Now()
	if err := cg.Add(pid); err != nil {
		return kill(err)
	}
	iso.Join = time.Since(t1)
	t1 = time.Now()
	if err := ctl.send("setup"); err != nil {
		return kill(fmt.Errorf("supervisor: isolation set-up: %w", err))
	}
	if msg, _, err := ctl.recv(shimTimeout); err != nil {
		return kill(fmt.Errorf("supervisor: isolation set-up: %w", err))
	} else if msg != "ok" {
		return kill(fmt.Errorf("supervisor: isolation set-up failed: %s", strings.TrimPrefix(msg, "error: ")))
	}
	iso.Namespaces += time.Since(t1)
	var egress io.Closer
	if spec.Egress != nil {
		t0 = time.Now()
		egress, err = spec.Egress(ctl.listen)
		if err != nil {
			return kill(fmt.Errorf("supervisor: egress path: %w", err))
		}
		iso.Egress = time.Since(t0)
	}
	if err := ctl.send("run"); err != nil {
		if egress != nil {
			egress.Close()
		}
		return kill(fmt.Errorf("supervisor: release child: %w", err))
	}
	stderr := &tailBuffer{max: stderrKeep}
	go func() {
		_, _ = io.Copy(stderr, stderrR)
		stderrR.Close()
	}()
	g := &Group{
		spec:       spec,
		log:        log,
		dir:        dir,
		cmd:        cmd,
		pid:        pid,
		cg:         cg,
		lease:      lease,
		egress:     egress,
		ctl:        ctl,
		stdout:     stdoutR,
		stderr:     stderr,
		stopCh:     make(chan StopReason, 1),
		done:       make(chan struct{}),
		bindInput:  make(chan []byte, 1),
		deadlineCh: make(chan time.Time, 1),
		phase:      PhaseRunning,
		onPhase:    spec.OnPhase,
		outcome:    Outcome{Isolation: iso},
	}
	leaderDone := make(chan struct{})
	go func() {
		err := cmd.Wait()
		g.recordExit(err)
		close(leaderDone)
	}()
	go func() {
		defer stdinW.Close()
		if len(spec.Input) > 0 {
			if _, err := stdinW.Write(spec.Input); err != nil {
				g.logger().Warn("child input not fully written", zap.Error(err))
				return
			}
		}
		if !spec.HoldInput {
			return
		}
		select {
		case in := <-g.bindInput:
			if _, err := stdinW.Write(in); err != nil {
				g.logger().Warn("bound input not fully written", zap.Error(err))
			}
		case <-g.done:
		}
	}()
	go g.supervise(leaderDone)
	return g, nil
}

// Binding is what a group prepared ahead of its attempt (Spec.HoldInput)
// learns when an attempt takes it.
type Binding struct {
	// Input is written to the child's standard input after Spec.Input;
	// then standard input is closed.
	Input []byte
	// HardDeadline replaces the prepared group's deadline (monotonic, as
	// Spec.HardDeadline).
	HardDeadline time.Time
	// OnPhase and Log replace the spec's from now on.
	OnPhase func(Phase, time.Time)
	Log     *zap.Logger
}

// ErrNotBindable is returned by Bind for a group that was not started with
// HoldInput, is bound already, or is stopping or gone.
var ErrNotBindable = errors.New("supervisor: group cannot be bound (not held, bound already, or ending)")

// Bind hands a prepared group to its attempt: the rest of the input, the
// attempt's hard deadline, its phase observer and log. A group is bound at
// most once; a group that is stopping or gone is not bound.
func (g *Group) Bind(b Binding) error {
	if b.HardDeadline.IsZero() {
		return errors.New("supervisor: a hard deadline is required")
	}
	g.mu.Lock()
	if !g.spec.HoldInput || g.bound || g.phase != PhaseRunning || !g.outcome.LeaderExitedAt.IsZero() {
		g.mu.Unlock()
		return ErrNotBindable
	}
	g.bound = true
	g.onPhase = b.OnPhase
	if b.Log != nil {
		g.log = b.Log
	}
	g.mu.Unlock()
	g.deadlineCh <- b.HardDeadline
	g.bindInput <- b.Input
	return nil
}

func (g *Group) logger() *zap.Logger {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.log
}

// Dir is the attempt directory, owned by the child user. It is removed
// before the group is reported released.
func (g *Group) Dir() string { return g.dir }

// Stdout is the child's standard output. It reaches EOF once every process
// of the attempt is gone (none can hold the pipe open past the PID
// namespace) and closes itself then, so output written just before the end
// is never lost. The caller must read it to EOF, or the child blocks on a
// full pipe.
func (g *Group) Stdout() io.Reader { return eofCloser{g.stdout} }

// eofCloser closes the file once it reported EOF or an error.
type eofCloser struct{ f *os.File }

func (e eofCloser) Read(p []byte) (int, error) {
	n, err := e.f.Read(p)
	if err != nil {
		e.f.Close()
	}
	return n, err
}

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
	onPhase := g.onPhase
	g.mu.Unlock()
	if onPhase != nil {
		onPhase(p, now)
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
	timer := time.NewTimer(time.Until(g.spec.HardDeadline))
	defer timer.Stop()
	var reason StopReason
wait:
	for {
		select {
		case <-leaderDone:
			break wait
		case <-timer.C:
			reason = StopDeadline
			break wait
		case reason = <-g.stopCh:
			break wait
		case d := <-g.deadlineCh:
			// Bound to an attempt: its deadline from now on.
			if !timer.Stop() {
				select {
				case <-timer.C:
				default:
				}
			}
			timer.Reset(time.Until(d))
		}
	}
	if reason != "" {
		g.mu.Lock()
		g.outcome.StopReason = reason
		g.outcome.StopRequestedAt = time.Now()
		g.mu.Unlock()
		g.setPhase(PhaseStopping)
		// Ask the child to close its browser itself; it knows how to
		// do that without leaving half-written files.
		_ = unix.Kill(-g.pid, unix.SIGTERM)
		grace := time.NewTimer(g.spec.Grace)
		select {
		case <-leaderDone:
			grace.Stop()
		case <-grace.C:
			g.mu.Lock()
			g.outcome.GraceExpired = true
			g.mu.Unlock()
			g.logger().Warn("child did not close within the grace; killing the whole attempt", zap.Duration("grace", g.spec.Grace))
		}
	}
	procs, procsErr := g.cg.Procs()
	g.mu.Lock()
	g.outcome.CleanupStartedAt = time.Now()
	g.outcome.ProcessesReclaimed = len(procs)
	g.mu.Unlock()
	g.setPhase(PhaseCleaning)
	// SIGKILL to the namespace's init makes the kernel kill every process
	// of the PID namespace; the cgroup kill takes anything in the cgroup.
	// A child that exited by itself (its result sent) took the namespace
	// with it: the kernel reaps a PID namespace's init only after every
	// other process of the namespace is gone, so an empty cgroup at this
	// look needs no kill (v1's freeze, signal and thaw cost ~10 ms on the
	// attempt's path, more under load); killUntilEmpty below proves it
	// either way.
	_ = unix.Kill(g.pid, unix.SIGKILL)
	if procsErr != nil || len(procs) > 0 {
		_ = g.cg.Kill()
	}
	<-leaderDone
	// The init of a PID namespace is reaped only after every other
	// process of the namespace is gone; the empty cgroup confirms it.
	proofBy := time.Now().Add(g.spec.ProofTimeout)
	deadline := proofBy
	reported := false
	for {
		_, err := g.cg.killUntilEmpty(deadline)
		if err == nil {
			g.mu.Lock()
			g.outcome.OOMKills = g.cg.OOMKills()
			g.mu.Unlock()
			if err = g.cg.Remove(); err == nil {
				err = os.RemoveAll(g.dir)
			}
			if err == nil {
				break
			}
		}
		if !reported && time.Now().After(proofBy) {
			reported = true
			g.logger().Error("attempt not proven gone; slot stays occupied", zap.Error(err))
			g.setPhase(PhaseUnreleased)
		}
		// Keep trying, a second at a time, for as long as it takes.
		deadline = time.Now().Add(time.Second)
		if deadline.Before(proofBy) {
			deadline = proofBy
		}
		time.Sleep(50 * time.Millisecond)
	}
	if g.egress != nil {
		g.egress.Close()
	}
	g.ctl.Close()
	g.lease.Release()
	g.mu.Lock()
	g.outcome.ReleasedAt = time.Now()
	g.mu.Unlock()
	g.setPhase(PhaseReleased)
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
