package supervisor

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// Limits are per-process resource limits set inside the new process before
// the child program runs, so nothing it starts escapes them (limits are
// inherited). Start fills zero fields with the defaults; core dumps are
// always off. Unprivileged (user-namespace mode) a limit above the control
// process's own hard limit stays at that hard limit.
type Limits struct {
	// DataBytes bounds each process's data segment and private writable
	// mappings (RLIMIT_DATA). Address-space limits (RLIMIT_AS) cannot be
	// used: Chromium reserves terabytes of address space it never
	// touches.
	DataBytes uint64
	// Processes bounds the processes of the child's user (RLIMIT_NPROC).
	// Every attempt has a user of its own, so this counts the attempt's
	// processes only; the cgroup's pids limit is the main bound.
	Processes uint64
	// FileBytes bounds the size of any file the group writes
	// (RLIMIT_FSIZE).
	FileBytes uint64
	// OpenFiles bounds descriptors per process (RLIMIT_NOFILE).
	OpenFiles uint64
}

// Defaults for Limits.
const (
	DefaultDataBytes     = 4 << 30
	DefaultUserProcesses = 1024
	DefaultFileBytes     = 256 << 20
	DefaultOpenFiles     = 8192
)

// WithDefaults fills zero fields with the defaults.
func (l Limits) WithDefaults() Limits {
	if l.DataBytes == 0 {
		l.DataBytes = DefaultDataBytes
	}
	if l.Processes == 0 {
		l.Processes = DefaultUserProcesses
	}
	if l.FileBytes == 0 {
		l.FileBytes = DefaultFileBytes
	}
	if l.OpenFiles == 0 {
		l.OpenFiles = DefaultOpenFiles
	}
	return l
}

// BecomeSubreaper makes the calling process the reaper of its orphaned
// descendants (PR_SET_CHILD_SUBREAPER), so a browser helper whose parent died
// is re-parented to the supervisor, where it can be found, killed and
// reaped, instead of to init.
func BecomeSubreaper() error {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("supervisor: PR_SET_CHILD_SUBREAPER: %w", err)
	}
	return nil
}
