package supervisor

import (
	"fmt"
	"slices"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ChildDeniedSyscalls are the system calls the attempt's child and every
// process it starts (Chromium and its helpers included) are refused with
// EPERM by a seccomp filter the shim installs right before the child runs,
// on top of the isolation (filters stack: Chromium's own seccomp-bpf
// sandbox adds its stricter filters below this one). None of them is used by
// Chromium or the child; each is kernel attack surface an unprivileged
// process can otherwise reach, mostly inside a user namespace of its own
// (which Chromium's sandbox needs and so cannot be forbidden):
//
//   - mount, umount2, pivot_root and the new mount API (open_tree,
//     move_mount, fsopen, fsconfig, fsmount, fspick, mount_setattr):
//     mounting file systems in a nested user namespace;
//   - keyctl, add_key, request_key: the kernel keyrings;
//   - bpf, perf_event_open, userfaultfd, io_uring_setup, io_uring_enter,
//     io_uring_register: interfaces with a long record of privilege
//     escalations;
//   - kexec_load, kexec_file_load, init_module, finit_module,
//     delete_module, reboot, swapon, swapoff, acct, syslog, quotactl,
//     settimeofday, clock_settime, clock_adjtime, adjtimex, vhangup:
//     host administration (refused anyway without host capabilities).
//
// Calls of another architecture's ABI (x32, or i386 through int 0x80 on
// amd64) are refused as a whole: their numbers mean other calls.
// deploy/seccomp/renderer.json, the container profile, refuses the same
// calls (a test checks the two agree).
var ChildDeniedSyscalls = map[string]uintptr{
	"mount": unix.SYS_MOUNT, "umount2": unix.SYS_UMOUNT2, "pivot_root": unix.SYS_PIVOT_ROOT,
	"open_tree": unix.SYS_OPEN_TREE, "move_mount": unix.SYS_MOVE_MOUNT, "fsopen": unix.SYS_FSOPEN,
	"fsconfig": unix.SYS_FSCONFIG, "fsmount": unix.SYS_FSMOUNT, "fspick": unix.SYS_FSPICK,
	"mount_setattr": unix.SYS_MOUNT_SETATTR,
	"keyctl":        unix.SYS_KEYCTL, "add_key": unix.SYS_ADD_KEY, "request_key": unix.SYS_REQUEST_KEY,
	"bpf": unix.SYS_BPF, "perf_event_open": unix.SYS_PERF_EVENT_OPEN, "userfaultfd": unix.SYS_USERFAULTFD,
	"io_uring_setup": unix.SYS_IO_URING_SETUP, "io_uring_enter": unix.SYS_IO_URING_ENTER,
	"io_uring_register": unix.SYS_IO_URING_REGISTER,
	"kexec_load":        unix.SYS_KEXEC_LOAD, "kexec_file_load": unix.SYS_KEXEC_FILE_LOAD,
	"init_module": unix.SYS_INIT_MODULE, "finit_module": unix.SYS_FINIT_MODULE, "delete_module": unix.SYS_DELETE_MODULE,
	"reboot": unix.SYS_REBOOT, "swapon": unix.SYS_SWAPON, "swapoff": unix.SYS_SWAPOFF, "acct": unix.SYS_ACCT,
	"syslog": unix.SYS_SYSLOG, "quotactl": unix.SYS_QUOTACTL, "settimeofday": unix.SYS_SETTIMEOFDAY,
	"clock_settime": unix.SYS_CLOCK_SETTIME, "clock_adjtime": unix.SYS_CLOCK_ADJTIME, "adjtimex": unix.SYS_ADJTIMEX,
	"vhangup": unix.SYS_VHANGUP,
}

// Offsets in struct seccomp_data.
const (
	seccompDataNr   = 0
	seccompDataArch = 4
)

// childFilter is the classic BPF program of the child's filter.
func childFilter() []unix.SockFilter {
	deny := unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
	stmt := func(code uint16, k uint32) unix.SockFilter { return unix.SockFilter{Code: code, K: k} }
	jeq := func(k uint32, jt, jf uint8) unix.SockFilter {
		return unix.SockFilter{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: k, Jt: jt, Jf: jf}
	}
	nrs := make([]uint32, 0, len(ChildDeniedSyscalls))
	for _, nr := range ChildDeniedSyscalls {
		nrs = append(nrs, uint32(nr))
	}
	slices.Sort(nrs)
	// Layout: arch check, load nr, [x32 check], one jeq per denied call
	// jumping to the last instruction (deny), allow, deny.
	p := []unix.SockFilter{
		stmt(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS, seccompDataArch),
		jeq(nativeAuditArch, 1, 0),
		stmt(unix.BPF_RET|unix.BPF_K, deny),
		stmt(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS, seccompDataNr),
	}
	if foreignNrBit != 0 {
		// jset: a number with the x32 bit is another ABI.
		p = append(p, unix.SockFilter{Code: unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K, K: foreignNrBit, Jt: uint8(len(nrs) + 1), Jf: 0})
	}
	for i, nr := range nrs {
		p = append(p, jeq(nr, uint8(len(nrs)-i), 0))
	}
	p = append(p, stmt(unix.BPF_RET|unix.BPF_K, unix.SECCOMP_RET_ALLOW), stmt(unix.BPF_RET|unix.BPF_K, deny))
	return p
}

// installChildFilter installs the child's filter on the calling thread
// (no_new_privs must be set); the exec that follows keeps it, and every
// process the child starts inherits it.
func installChildFilter() error {
	if nativeAuditArch == 0 {
		return fmt.Errorf("no seccomp filter for this architecture; the child cannot start")
	}
	prog := childFilter()
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	if _, _, e := unix.RawSyscall(unix.SYS_PRCTL, unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_FILTER, uintptr(unsafe.Pointer(&fprog))); e != 0 {
		return fmt.Errorf("install the child's seccomp filter: %w", e)
	}
	return nil
}
