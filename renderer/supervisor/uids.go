package supervisor

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// UIDPool hands out the unprivileged user IDs attempts run as: one per
// attempt, from a configured range, never one another attempt on the same
// host holds at the same time. A lease is an exclusive flock on a file named
// after the ID in a lock directory every renderer of the host shares, so
// several renderer instances with the same range still never share an ID;
// the kernel drops the lock when its holder dies, so a crashed renderer
// leaks nothing. The group ID equals the user ID. Unprivileged
// (ModeUserNamespace) the range must lie inside the control process's user's
// /etc/subuid and /etc/subgid ranges: the leased ID is then the one ID
// mapped in the attempt's user namespace.
type UIDPool struct {
	First, Last uint32
	// LockDir holds the lease files; it must be on a file system the
	// host's renderers share (default /run/slidecells-renderer-uids).
	LockDir string
}

// DefaultUIDFirst, DefaultUIDLast and DefaultUIDLockDir are the defaults of
// the pool: 1000 IDs far above distribution users.
const (
	DefaultUIDFirst   = 200000
	DefaultUIDLast    = 200999
	DefaultUIDLockDir = "/run/slidecells-renderer-uids"
)

// ErrNoFreeUID means every ID of the range is leased.
var ErrNoFreeUID = errors.New("supervisor: every child user ID of the range is in use")

// Check validates the range and prepares the lock directory. Unprivileged
// (user-namespace mode) it also checks that the user may map every ID of the
// range (/etc/subuid, /etc/subgid) and that the helpers doing it exist.
func (p *UIDPool) Check() error {
	if p.First == 0 || p.Last < p.First {
		return fmt.Errorf("supervisor: child user ID range %d-%d is empty or includes root", p.First, p.Last)
	}
	if p.First < 1000 {
		return fmt.Errorf("supervisor: child user ID range must start at 1000 or above, not %d (system users live below)", p.First)
	}
	if CurrentMode() == ModeUserNamespace {
		if err := checkUserNamespaceMode(p.First, p.Last); err != nil {
			return fmt.Errorf("supervisor: %w", err)
		}
	}
	if err := os.MkdirAll(p.LockDir, 0o700); err != nil {
		return fmt.Errorf("supervisor: child user ID lock directory: %w", err)
	}
	if err := unix.Access(p.LockDir, unix.W_OK|unix.X_OK); err != nil {
		return fmt.Errorf("supervisor: child user ID lock directory %s is not writable by user %d: %w", p.LockDir, os.Geteuid(), err)
	}
	return nil
}

// Lease is one leased ID; Release gives it back.
type Lease struct {
	UID uint32
	fd  int
}

// lastLeased is the ID this process leased last, per lock directory.
var lastLeased sync.Map

// Acquire leases a free ID, starting the search at a random offset, and never
// at the ID this process leased last: consecutive attempts (an attempt and the
// standby prepared after it) get different users whenever another is free.
func (p *UIDPool) Acquire() (*Lease, error) {
	n := uint64(p.Last-p.First) + 1
	var b [8]byte
	_, _ = rand.Read(b[:])
	start := binary.LittleEndian.Uint64(b[:]) % n
	if last, ok := lastLeased.Load(p.LockDir); ok && n > 1 && p.First+uint32(start) == last.(uint32) {
		start = (start + 1) % n
	}
	for i := uint64(0); i < n; i++ {
		uid := p.First + uint32((start+i)%n)
		path := filepath.Join(p.LockDir, strconv.FormatUint(uint64(uid), 10))
		fd, err := unix.Open(path, unix.O_CREAT|unix.O_RDWR|unix.O_CLOEXEC, 0o600)
		if err != nil {
			return nil, fmt.Errorf("supervisor: lease file: %w", err)
		}
		if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
			unix.Close(fd)
			continue
		}
		lastLeased.Store(p.LockDir, uid)
		return &Lease{UID: uid, fd: fd}, nil
	}
	return nil, ErrNoFreeUID
}

// Release ends the lease. Call it only after every process of the attempt
// is proven gone.
func (l *Lease) Release() {
	if l != nil && l.fd >= 0 {
		unix.Close(l.fd)
		l.fd = -1
	}
}
