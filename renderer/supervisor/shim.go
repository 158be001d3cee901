package supervisor

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// shimArg0 marks a process started as the exec shim. The shim is the
// supervisor's own binary re-executed as the first process of the attempt's
// new PID, network, mount and IPC namespaces (and, unprivileged, a new user
// namespace). It waits until the supervisor has mapped its user (user-
// namespace mode) and placed it in the attempt's cgroup; then it builds the
// restricted file view (a size-bounded private temp file system over /tmp,
// the temp root and /dev/shm, the control process's credentials covered, a
// /proc and /sys of the new namespaces), brings up loopback, reports ready,
// opens the listeners the supervisor asks for inside its network namespace
// and hands them over, and on "run" sets the resource limits, becomes the
// attempt's user with no capabilities left, re-arms the parent-death
// signal, sets no_new_privs, installs the attempt's seccomp filter and
// executes the child, which becomes the namespace's init: when it ends, the
// kernel kills every other process of the namespace.
const shimArg0 = "render-supervisor-shim"

// shimCtlFD is the shim's end of a SOCK_SEQPACKET socket pair with the
// supervisor; one message per datagram:
//
//	supervisor → shim  "setup"                   IDs mapped, shim in the attempt's cgroup
//	shim → supervisor  "ok" | "error: <text>"    namespaces, file view and loopback ready
//	supervisor → shim  "listen <net> <addr>"     (any number of times)
//	shim → supervisor  "fd" + SCM_RIGHTS | "error: <text>"
//	supervisor → shim  "run"                     the shim executes the child
//
// End of file at any point means the supervisor is gone; the shim exits. The
// socket is close-on-exec, so the child never holds it.
const shimCtlFD = 3

// shimConfig is what the shim needs; none of it is secret (it is visible in
// /proc as an argument).
type shimConfig struct {
	UID uint32 `json:"uid"`
	// UserNS: the shim runs in a user namespace of its own, where UID is
	// mapped to itself; it becomes UID before building the file view
	// (keeping its capabilities in that namespace only) and drops every
	// capability before the child runs.
	UserNS     bool     `json:"user_ns,omitempty"`
	Limits     Limits   `json:"limits"`
	TempRoot   string   `json:"temp_root"`
	AttemptDir string   `json:"attempt_dir"`
	TempBytes  uint64   `json:"temp_bytes"`
	Hide       []string `json:"hide,omitempty"`
	Target     string   `json:"target"`
	Argv       []string `json:"argv"`
}

// RunShimIfRequested turns the process into the exec shim when it was
// started as one, and never returns in that case. Every binary that uses
// Start must call it first thing in main (and in TestMain), before any other
// work.
func RunShimIfRequested() {
	if len(os.Args) != 2 || os.Args[0] != shimArg0 {
		return
	}
	// Capabilities, the parent-death signal and no_new_privs belong to
	// a thread; the exec below must come from the thread that set them.
	runtime.LockOSThread()
	err := runShim(os.Args[1])
	_ = shimSend("error: "+err.Error(), -1)
	fmt.Fprintf(os.Stderr, "supervisor shim: %v\n", err)
	os.Exit(127)
}

func shimArgs(c shimConfig) []string {
	b, _ := json.Marshal(c)
	return []string{shimArg0, string(b)}
}

// errSupervisorGone: the control socket reached end of file.
var errSupervisorGone = errors.New("supervisor gone before the child could start")

func shimRecv() (string, error) {
	buf := make([]byte, 1024)
	n, _, _, _, err := unix.Recvmsg(shimCtlFD, buf, nil, 0)
	if err != nil {
		return "", fmt.Errorf("control socket: %w", err)
	}
	if n == 0 {
		return "", errSupervisorGone
	}
	return string(buf[:n]), nil
}

// shimSend sends msg, with the descriptor fd attached when fd ≥ 0.
func shimSend(msg string, fd int) error {
	var oob []byte
	if fd >= 0 {
		oob = unix.UnixRights(fd)
	}
	return unix.Sendmsg(shimCtlFD, []byte(msg), oob, nil, 0)
}

func runShim(arg string) error {
	var c shimConfig
	if err := json.Unmarshal([]byte(arg), &c); err != nil {
		return fmt.Errorf("bad shim configuration: %w", err)
	}
	if os.Getpid() != 1 {
		return fmt.Errorf("not the first process of a new PID namespace")
	}
	// The kernel should pick the browser, not the control process, under
	// memory pressure. Raising one's own score needs no privilege; it is
	// done now, while /proc/self still belongs to this process's user.
	if err := os.WriteFile("/proc/self/oom_score_adj", []byte("900"), 0); err != nil {
		return fmt.Errorf("oom_score_adj: %w", err)
	}
	// Open the target before the file view changes (it may live under a
	// folder the view covers, like a test binary below /tmp) and with the
	// shim's starting credentials, so the child user needs execute
	// permission on the file only, not on every directory above it.
	fd, err := unix.Open(c.Target, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", c.Target, err)
	}
	if msg, err := shimRecv(); err != nil {
		return err
	} else if msg != "setup" {
		return fmt.Errorf("unexpected message %q", msg)
	}
	if c.UserNS {
		// Unmapped, the shim could create no file; as the attempt's
		// user it keeps every capability of its own user namespace
		// (that user is not the namespace's root, so the kernel clears
		// nothing) and none anywhere else.
		if err := becomeUser(c.UID); err != nil {
			return err
		}
		if err := armParentDeath(); err != nil {
			return err
		}
	}
	if err := buildFileView(&c); err != nil {
		return err
	}
	if err := loopbackUp(); err != nil {
		return fmt.Errorf("loopback: %w", err)
	}
	if err := shimSend("ok", -1); err != nil {
		return err
	}
	for {
		msg, err := shimRecv()
		if err != nil {
			return err
		}
		if msg == "run" {
			break
		}
		network, addr, ok := strings.Cut(strings.TrimPrefix(msg, "listen "), " ")
		if !ok || !strings.HasPrefix(msg, "listen ") {
			return fmt.Errorf("unexpected message %q", msg)
		}
		if err := handOverListener(network, addr); err != nil {
			if err := shimSend("error: "+err.Error(), -1); err != nil {
				return err
			}
		}
	}
	if err := setLimits(c.Limits); err != nil {
		return err
	}
	// No capability may come back to anything the child starts, even
	// through a file with capabilities.
	if err := dropBoundingSet(); err != nil {
		return err
	}
	if !c.UserNS {
		if err := becomeUser(c.UID); err != nil {
			return err
		}
	}
	if err := clearCapabilities(); err != nil {
		return err
	}
	if err := armParentDeath(); err != nil {
		return err
	}
	// The child works in its attempt directory (its browser profile lives
	// there).
	if err := unix.Chdir(c.AttemptDir); err != nil {
		return fmt.Errorf("chdir %s: %w", c.AttemptDir, err)
	}
	// Nothing below may gain privileges through set-user-ID binaries.
	// Chromium's namespace sandbox works with this set.
	if _, _, e := unix.RawSyscall6(unix.SYS_PRCTL, unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0, 0); e != 0 {
		return fmt.Errorf("prctl NO_NEW_PRIVS: %w", e)
	}
	if err := installChildFilter(); err != nil {
		return err
	}
	// Nothing but the standard descriptors reaches the child: not the
	// control socket, not a descriptor the control process inherited
	// from its own parent without close-on-exec.
	if err := closeOnExecFrom(3); err != nil {
		return err
	}
	argvp, err := syscall.SlicePtrFromStrings(c.Argv)
	if err != nil {
		return err
	}
	envp, err := syscall.SlicePtrFromStrings(os.Environ())
	if err != nil {
		return err
	}
	empty, _ := unix.BytePtrFromString("")
	_, _, e := unix.RawSyscall6(unix.SYS_EXECVEAT, uintptr(fd),
		uintptr(unsafe.Pointer(empty)),
		uintptr(unsafe.Pointer(&argvp[0])),
		uintptr(unsafe.Pointer(&envp[0])),
		unix.AT_EMPTY_PATH, 0)
	return fmt.Errorf("execveat %s: %w", c.Target, e)
}

// handOverListener opens a listener inside the shim's network namespace and
// sends its socket to the supervisor, which serves it from the host's
// namespace; the shim keeps no copy.
func handOverListener(network, addr string) error {
	ln, err := net.Listen(network, addr)
	if err != nil {
		return err
	}
	defer ln.Close()
	f, err := ln.(*net.TCPListener).File()
	if err != nil {
		return err
	}
	defer f.Close()
	return shimSend("fd", int(f.Fd()))
}

// closeOnExecFrom marks every descriptor from first on close-on-exec.
func closeOnExecFrom(first int) error {
	if err := unix.CloseRange(uint(first), math.MaxUint32, unix.CLOSE_RANGE_CLOEXEC); err == nil {
		return nil
	}
	// Kernels before 5.11: one by one.
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return fmt.Errorf("list descriptors: %w", err)
	}
	for _, e := range ents {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd >= first {
			unix.CloseOnExec(fd)
		}
	}
	return nil
}

// becomeUser switches every thread to uid (group uid, no supplementary
// groups: none of the control process's groups may reach the child).
func becomeUser(uid uint32) error {
	id := int(uid)
	if err := syscall.Setgroups(nil); err != nil {
		return fmt.Errorf("setgroups: %w", err)
	}
	if err := syscall.Setresgid(id, id, id); err != nil {
		return fmt.Errorf("setresgid %d: %w", id, err)
	}
	if err := syscall.Setresuid(id, id, id); err != nil {
		return fmt.Errorf("setresuid %d: %w", id, err)
	}
	return nil
}

// armParentDeath (re-)arms SIGKILL on the supervisor's death (the kernel
// clears it on every credential change) and then checks the supervisor did
// not die before: it keeps its end of the control socket open while it
// lives, so a hang-up means it is gone.
func armParentDeath() error {
	if _, _, e := unix.RawSyscall(unix.SYS_PRCTL, unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL), 0); e != 0 {
		return fmt.Errorf("prctl PDEATHSIG: %w", e)
	}
	pfd := []unix.PollFd{{Fd: shimCtlFD, Events: unix.POLLIN}}
	if n, _ := unix.Poll(pfd, 0); n > 0 && pfd[0].Revents&(unix.POLLHUP|unix.POLLERR|unix.POLLRDHUP) != 0 {
		return errSupervisorGone
	}
	return nil
}

// setLimits sets the per-process limits. Without CAP_SYS_RESOURCE of the
// host (user-namespace mode) a hard limit cannot be raised; the limit then
// stays at the current, lower, hard limit: stricter, never looser.
func setLimits(l Limits) error {
	for _, r := range []struct {
		name string
		res  int
		v    uint64
	}{{"RLIMIT_DATA", unix.RLIMIT_DATA, l.DataBytes}, {"RLIMIT_FSIZE", unix.RLIMIT_FSIZE, l.FileBytes},
		{"RLIMIT_NOFILE", unix.RLIMIT_NOFILE, l.OpenFiles}, {"RLIMIT_NPROC", unix.RLIMIT_NPROC, l.Processes}} {
		lim := unix.Rlimit{Cur: r.v, Max: r.v}
		err := unix.Prlimit(0, r.res, &lim, nil)
		if errors.Is(err, unix.EPERM) {
			var cur unix.Rlimit
			if unix.Prlimit(0, r.res, nil, &cur) == nil && cur.Max < r.v {
				lim = unix.Rlimit{Cur: cur.Max, Max: cur.Max}
				err = unix.Prlimit(0, r.res, &lim, nil)
			}
		}
		if err != nil {
			return fmt.Errorf("set %s: %w", r.name, err)
		}
	}
	// No core dumps: they could hold page content and credentials.
	if err := unix.Prlimit(0, unix.RLIMIT_CORE, &unix.Rlimit{}, nil); err != nil {
		return fmt.Errorf("set RLIMIT_CORE: %w", err)
	}
	return nil
}

// lastCap is the highest capability the kernel knows.
func lastCap() (int, error) {
	b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap")
	if err != nil {
		return 0, fmt.Errorf("cap_last_cap: %w", err)
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// dropBoundingSet removes every capability from the thread's bounding set
// (needs CAP_SETPCAP, which the shim still has).
func dropBoundingSet() error {
	last, err := lastCap()
	if err != nil {
		return err
	}
	for c := 0; c <= last; c++ {
		if _, _, e := unix.RawSyscall6(unix.SYS_PRCTL, unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0, 0); e != 0 {
			return fmt.Errorf("drop capability %d from the bounding set: %w", c, e)
		}
	}
	return nil
}

// clearCapabilities empties the ambient, inheritable, permitted and
// effective sets of the thread and checks they are empty.
func clearCapabilities() error {
	if _, _, e := unix.RawSyscall6(unix.SYS_PRCTL, unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0, 0); e != 0 {
		return fmt.Errorf("clear ambient capabilities: %w", e)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if _, _, e := unix.RawSyscall(unix.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); e != 0 {
		return fmt.Errorf("capset: %w", e)
	}
	if _, _, e := unix.RawSyscall(unix.SYS_CAPGET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); e != 0 {
		return fmt.Errorf("capget: %w", e)
	}
	for _, d := range data {
		if d.Effective != 0 || d.Permitted != 0 || d.Inheritable != 0 {
			return fmt.Errorf("capabilities left after clearing: %+v", data)
		}
	}
	return nil
}

// buildFileView builds the child's file view inside its new mount
// namespace. Nothing here is visible to the host, and all of it disappears
// with the namespace.
func buildFileView(c *shimConfig) error {
	// Nothing mounted here may propagate back to the host.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	// One size-bounded temp file system holds every place the child can
	// write: /tmp, the temp root with the attempt directory, /dev/shm.
	// Its size is the attempt's temp-disk limit; its pages are charged
	// to the attempt's memory cgroup.
	opts := "mode=1777,size=" + strconv.FormatUint(c.TempBytes, 10)
	if err := unix.Mount("tmpfs", "/tmp", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return fmt.Errorf("private /tmp: %w", err)
	}
	if c.TempRoot == "/tmp" || strings.HasPrefix(c.TempRoot, "/tmp/") {
		if err := os.MkdirAll(c.TempRoot, 0o711); err != nil {
			return err
		}
	} else {
		// The temp root lives elsewhere: cover it (the control
		// process's result store is there) with a folder of the
		// private temp file system.
		hold := "/tmp/.temp-root"
		if err := os.Mkdir(hold, 0o711); err != nil {
			return err
		}
		if err := unix.Mount(hold, c.TempRoot, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("cover temp root: %w", err)
		}
	}
	if err := os.Mkdir(c.AttemptDir, 0o700); err != nil {
		return fmt.Errorf("attempt directory: %w", err)
	}
	if err := os.Chown(c.AttemptDir, int(c.UID), int(c.UID)); err != nil {
		return err
	}
	if _, err := os.Stat("/dev/shm"); err == nil {
		if err := os.Mkdir("/tmp/.shm", 0o1777); err != nil {
			return err
		}
		_ = os.Chmod("/tmp/.shm", 0o1777)
		if err := unix.Mount("/tmp/.shm", "/dev/shm", "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("private /dev/shm: %w", err)
		}
	}
	for _, p := range c.Hide {
		st, err := os.Stat(p)
		if err != nil {
			continue // nothing there to hide
		}
		if st.IsDir() {
			err = unix.Mount("tmpfs", p, "tmpfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=4k,mode=0")
		} else {
			err = unix.Mount("/dev/null", p, "", unix.MS_BIND, "")
		}
		if err != nil {
			return fmt.Errorf("hide %s: %w", p, err)
		}
	}
	// A /sys of the new network namespace: its interfaces only (and no
	// cgroup file systems).
	if err := unix.Mount("sysfs", "/sys", "sysfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mount /sys: %w", err)
	}
	// A /proc of the new PID namespace: the child sees its own processes
	// only, not the control process or its environment.
	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mount /proc: %w", err)
	}
	return nil
}

// loopbackUp brings up lo, the only interface of a new network namespace.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}
