package renderer

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"

	rc "slidecells/shared/rendercontract"
)

// bootIDFile holds the kernel's boot ID: random, new at every boot of every host.
const bootIDFile = "/proc/sys/kernel/random/boot_id"

// hostIdentity is where this epoch runs (reported in capabilities): the host's boot ID and the
// identity of the renderer's cgroup — its cgroup namespace (a container of its own has one of
// its own, so two containers that both see their group at the same path differ) and the group's
// directories. A new epoch with the same identity emptied the very cgroup the earlier epoch's
// attempts ran in before it served, which is what proves them gone; a worker that reappears on
// another host, in another container or under another cgroup proves nothing.
func hostIdentity(cgroupDirs []string) (rc.HostIdentity, error) {
	b, err := os.ReadFile(bootIDFile)
	if err != nil {
		return rc.HostIdentity{}, fmt.Errorf("host identity: %w", err)
	}
	boot := strings.TrimSpace(string(b))
	if boot == "" || len(boot) > 64 {
		return rc.HostIdentity{}, errors.New("host identity: the kernel's boot ID is empty or malformed")
	}
	var st syscall.Stat_t
	if err := syscall.Stat("/proc/self/ns/cgroup", &st); err != nil {
		return rc.HostIdentity{}, fmt.Errorf("host identity: cgroup namespace: %w", err)
	}
	if len(cgroupDirs) == 0 {
		return rc.HostIdentity{}, errors.New("host identity: the renderer has no cgroup")
	}
	return rc.HostIdentity{BootID: boot, Cgroup: fmt.Sprintf("cgroupns:%d:%d:%s", st.Dev, st.Ino, strings.Join(cgroupDirs, ","))}, nil
}
