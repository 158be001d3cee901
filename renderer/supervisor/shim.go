package supervisor

import (
	"encoding/json"
	"fmt"
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
// new PID, network and mount namespaces. As root inside them, before the
// child program runs, it builds the restricted file view (a size-bounded
// private temp file system over /tmp, the temp root and /dev/shm, the
// control process's credentials covered, a /proc of the new PID
// namespace), brings up loopback, reports ready and waits until the
// supervisor has placed it in the attempt's cgroup and opened the egress
// listener in its network namespace; then it sets the resource limits,
// drops to the attempt's user, re-arms the parent-death signal, sets
// no_new_privs and executes the child, which becomes the namespace's init:
// when it ends, the kernel kills every other process of the namespace.
const shimArg0 = "render-supervisor-shim"

// File descriptors the shim inherits besides stdio.
const (
	shimGoFD     = 3 // read: the supervisor writes one byte when the child may run; EOF = supervisor gone
	shimStatusFD = 4 // write: "ok" once the namespaces are set up, or the error
)

// shimConfig is what the shim needs; none of it is secret (it is visible in
// /proc as an argument).
type shimConfig struct {
	UID        uint32   `json:"uid"`
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
	// Credentials changed by raw system calls apply to the calling
	// thread only; the exec below must come from that same thread.
	runtime.LockOSThread()
	status := os.NewFile(shimStatusFD, "status")
	err := runShim(os.Args[1], status)
	fmt.Fprintf(status, "error: %v\n", err)
	fmt.Fprintf(os.Stderr, "supervisor shim: %v\n", err)
	os.Exit(127)
}

func shimArgs(c shimConfig) []string {
	b, _ := json.Marshal(c)
	return []string{shimArg0, string(b)}
}

func runShim(arg string, status *os.File) error {
	var c shimConfig
	if err := json.Unmarshal([]byte(arg), &c); err != nil {
		return fmt.Errorf("bad shim configuration: %w", err)
	}
	if os.Getpid() != 1 {
		return fmt.Errorf("not the first process of a new PID namespace")
	}
	// Open the target before the file view changes (it may live under a
	// folder the view covers, like a test binary below /tmp) and while
	// still privileged, so the child user needs execute permission on the
	// file only, not on every directory above it.
	fd, err := unix.Open(c.Target, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", c.Target, err)
	}
	if err := buildFileView(&c); err != nil {
		return err
	}
	if err := loopbackUp(); err != nil {
		return fmt.Errorf("loopback: %w", err)
	}
	if _, err := status.WriteString("ok\n"); err != nil {
		return err
	}
	var b [1]byte
	if n, _ := unix.Read(shimGoFD, b[:]); n != 1 {
		return fmt.Errorf("supervisor gone before the child could start")
	}
	l := c.Limits
	for _, r := range []struct {
		res int
		v   uint64
	}{{unix.RLIMIT_DATA, l.DataBytes}, {unix.RLIMIT_FSIZE, l.FileBytes}, {unix.RLIMIT_NOFILE, l.OpenFiles}, {unix.RLIMIT_NPROC, l.Processes}} {
		if r.v == 0 {
			continue
		}
		if err := unix.Prlimit(0, r.res, &unix.Rlimit{Cur: r.v, Max: r.v}, nil); err != nil {
			return fmt.Errorf("set limit %d: %w", r.res, err)
		}
	}
	// No core dumps: they could hold page content and credentials.
	if err := unix.Prlimit(0, unix.RLIMIT_CORE, &unix.Rlimit{}, nil); err != nil {
		return fmt.Errorf("set RLIMIT_CORE: %w", err)
	}
	uid := uintptr(c.UID)
	if _, _, e := unix.RawSyscall(unix.SYS_SETGROUPS, 0, 0, 0); e != 0 {
		return fmt.Errorf("setgroups: %w", e)
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESGID, uid, uid, uid); e != 0 {
		return fmt.Errorf("setresgid: %w", e)
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, uid, uid, uid); e != 0 {
		return fmt.Errorf("setresuid: %w", e)
	}
	// The kernel clears the parent-death signal on a credential change.
	if _, _, e := unix.RawSyscall(unix.SYS_PRCTL, unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL), 0); e != 0 {
		return fmt.Errorf("prctl PDEATHSIG: %w", e)
	}
	// The supervisor keeps its end of the go pipe open while it lives;
	// a hang-up now means it died before the signal was re-armed.
	pfd := []unix.PollFd{{Fd: shimGoFD, Events: unix.POLLIN}}
	if n, _ := unix.Poll(pfd, 0); n > 0 && pfd[0].Revents&(unix.POLLHUP|unix.POLLERR) != 0 {
		return fmt.Errorf("supervisor died during start")
	}
	// Nothing below may gain privileges through set-user-ID binaries.
	// Chromium's namespace sandbox works with this set.
	if _, _, e := unix.RawSyscall6(unix.SYS_PRCTL, unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0, 0); e != 0 {
		return fmt.Errorf("prctl NO_NEW_PRIVS: %w", e)
	}
	unix.CloseOnExec(shimGoFD)
	unix.CloseOnExec(shimStatusFD)
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
	// A /sys of the new network namespace: its interfaces only.
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
