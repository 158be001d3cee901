package supervisor

import (
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
// supervisor's own binary re-executed: it sets the resource limits on
// itself, drops to the child user, re-arms the parent-death signal and
// executes the real child. Doing this inside the new process rather than
// with prlimit from outside needs no CAP_SYS_RESOURCE, and it guarantees the
// limits and the user are in place before the child's first instruction.
const shimArg0 = "render-supervisor-shim"

// RunShimIfRequested turns the process into the exec shim when it was
// started as one, and never returns in that case. Every binary that uses
// Start must call it first thing in main (and in TestMain), before any other
// work.
func RunShimIfRequested() {
	if len(os.Args) < 5 || os.Args[0] != shimArg0 {
		return
	}
	// Credentials changed by raw system calls apply to the calling
	// thread only; the exec below must come from that same thread.
	runtime.LockOSThread()
	err := runShim(os.Args[1:])
	fmt.Fprintf(os.Stderr, "supervisor shim: %v\n", err)
	os.Exit(127)
}

// shimArgs encodes what the shim needs; none of it is secret.
//
//	<uid>:<gid>|- <data>,<nproc>,<fsize>,<nofile> <parent pid> <target> [args...]
func shimArgs(cred *syscall.Credential, l Limits, target string, args []string) []string {
	ids := "-"
	if cred != nil {
		ids = fmt.Sprintf("%d:%d", cred.Uid, cred.Gid)
	}
	lim := fmt.Sprintf("%d,%d,%d,%d", l.DataBytes, l.Processes, l.FileBytes, l.OpenFiles)
	out := []string{shimArg0, ids, lim, strconv.Itoa(os.Getpid()), target}
	return append(out, args...)
}

func runShim(a []string) error {
	ids, lim, ppidStr, target, argv := a[0], a[1], a[2], a[3], a[4:]
	parent, err := strconv.Atoi(ppidStr)
	if err != nil {
		return fmt.Errorf("bad parent pid %q", ppidStr)
	}
	var l [4]uint64
	parts := strings.Split(lim, ",")
	if len(parts) != 4 {
		return fmt.Errorf("bad limits %q", lim)
	}
	for i, p := range parts {
		if l[i], err = strconv.ParseUint(p, 10, 64); err != nil {
			return fmt.Errorf("bad limit %q", p)
		}
	}
	for i, res := range []int{unix.RLIMIT_DATA, unix.RLIMIT_NPROC, unix.RLIMIT_FSIZE, unix.RLIMIT_NOFILE} {
		if l[i] == 0 {
			continue
		}
		if err := unix.Prlimit(0, res, &unix.Rlimit{Cur: l[i], Max: l[i]}, nil); err != nil {
			return fmt.Errorf("set limit %d: %w", res, err)
		}
	}
	// No core dumps: they could hold page content and credentials.
	if err := unix.Prlimit(0, unix.RLIMIT_CORE, &unix.Rlimit{}, nil); err != nil {
		return fmt.Errorf("set RLIMIT_CORE: %w", err)
	}
	// Open the target while still privileged, so the child user needs
	// execute permission on the file only, not on every directory above
	// it (test binaries live in private temp directories).
	fd, err := unix.Open(target, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", target, err)
	}
	if ids != "-" {
		uidStr, gidStr, _ := strings.Cut(ids, ":")
		uid, err1 := strconv.Atoi(uidStr)
		gid, err2 := strconv.Atoi(gidStr)
		if err1 != nil || err2 != nil {
			return fmt.Errorf("bad ids %q", ids)
		}
		if _, _, e := unix.RawSyscall(unix.SYS_SETGROUPS, 0, 0, 0); e != 0 {
			return fmt.Errorf("setgroups: %w", e)
		}
		if _, _, e := unix.RawSyscall(unix.SYS_SETRESGID, uintptr(gid), uintptr(gid), uintptr(gid)); e != 0 {
			return fmt.Errorf("setresgid: %w", e)
		}
		if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, uintptr(uid), uintptr(uid), uintptr(uid)); e != 0 {
			return fmt.Errorf("setresuid: %w", e)
		}
	}
	// The kernel clears the parent-death signal on a credential change.
	if _, _, e := unix.RawSyscall(unix.SYS_PRCTL, unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL), 0); e != 0 {
		return fmt.Errorf("prctl PDEATHSIG: %w", e)
	}
	if unix.Getppid() != parent {
		return fmt.Errorf("supervisor died during start")
	}
	// Nothing below may gain privileges through set-user-ID binaries.
	// Chromium's namespace sandbox works with this set (its seccomp
	// layer sets it anyway).
	if _, _, e := unix.RawSyscall6(unix.SYS_PRCTL, unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0, 0); e != 0 {
		return fmt.Errorf("prctl NO_NEW_PRIVS: %w", e)
	}
	argvp, err := syscall.SlicePtrFromStrings(argv)
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
	return fmt.Errorf("execveat %s: %w", target, e)
}
