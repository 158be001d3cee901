// Package unpriv prepares this host for an unprivileged renderer the way a
// deployment does (see renderer/README.md, "Running unprivileged"), for the
// tests and the benchmark: a system user, its subordinate ID ranges in
// /etc/subuid and /etc/subgid, Debian's uidmap helpers, a lease directory
// and a delegated cgroup; and it runs commands as that user inside that
// cgroup. Preparing needs root; CI runs as root.
//
// It imports nothing of the renderer, so the supervisor's own tests can use
// it.
package unpriv

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// The user, its range and its lease directory. The range is disjoint from
// the renderer's default range (200000-200999, used by root-mode tests), so
// the two modes never lease the same IDs.
const (
	User    = "slidecells-rtest"
	First   = 300000
	Last    = 300999
	LockDir = "/run/slidecells-renderer-uids-rtest"
)

// Marker variables of a test binary RunTests started.
const (
	// EnvMarker: the run is unprivileged (user First-Last, LockDir).
	EnvMarker = "SLIDECELLS_UNPRIVILEGED_TEST"
	// EnvCgroupV2 names the cgroup v2 mount the run must use instead of
	// /sys/fs/cgroup, with only the hugetlb controller (the v2 mechanics
	// on a hybrid host, whose memory, pids and cpu controllers are bound
	// to v1 hierarchies).
	EnvCgroupV2 = "SLIDECELLS_TEST_CGROUP_V2"
)

// Inside reports whether this test binary runs as the unprivileged user
// (started by RunTests).
func Inside() bool { return os.Getenv(EnvMarker) == "1" }

// Host is a prepared host.
type Host struct {
	User     string
	UID, GID int
	// Cgroups are the delegated directories: one per v1 hierarchy
	// (memory, pids, cpu, freezer), or one on cgroup v2.
	Cgroups []string
	// V2Mount is the cgroup v2 mount the delegation lives on, if v2.
	V2Mount string
	// NoNewPrivs makes Command set no_new_privs, BoundingSetDrop (for
	// example "-setuid") drops capabilities from the bounding set: a
	// misconfigured host, where the set-user-ID helpers cannot act.
	NoNewPrivs      bool
	BoundingSetDrop string
}

// Options choose the delegated cgroup.
type Options struct {
	// Name of the delegated cgroup; unique per test.
	Name string
	// V2Mount, when set, delegates on this cgroup v2 mount (for example
	// /sys/fs/cgroup/unified on a hybrid host) with Controllers enabled;
	// otherwise /sys/fs/cgroup decides: cgroup2 there is v2 with memory,
	// pids and cpu, anything else the v1 hierarchies.
	V2Mount     string
	Controllers []string
}

const cgroupRoot = "/sys/fs/cgroup"

var v1Hierarchies = []string{"memory", "pids", "cpu", "freezer"}

// Prepare makes sure the user, its ranges, the helpers and the lease
// directory exist (idempotent, under a host-wide lock, safe for concurrent
// test binaries), then delegates a fresh cgroup to the user. cleanup kills
// whatever is left in the cgroup and removes it.
func Prepare(o Options) (h *Host, cleanup func() error, err error) {
	if os.Geteuid() != 0 {
		return nil, nil, errors.New("unpriv: preparing the host needs root")
	}
	lock, err := os.OpenFile("/run/slidecells-unpriv-setup.lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, nil, err
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		return nil, nil, err
	}
	if err := ensureHost(); err != nil {
		return nil, nil, fmt.Errorf("unpriv: %w", err)
	}
	u, err := user.Lookup(User)
	if err != nil {
		return nil, nil, err
	}
	h = &Host{User: User}
	h.UID, _ = strconv.Atoi(u.Uid)
	h.GID, _ = strconv.Atoi(u.Gid)
	if err := h.delegate(o); err != nil {
		_ = h.removeCgroups()
		return nil, nil, fmt.Errorf("unpriv: delegate a cgroup: %w", err)
	}
	return h, h.removeCgroups, nil
}

// ensureHost installs uidmap when missing and creates the user, its ranges
// and the lease directory.
func ensureHost() error {
	if _, err := exec.LookPath("newuidmap"); err != nil {
		cmd := exec.Command("apt-get", "install", "-y", "-q", "--no-install-recommends", "uidmap")
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("newuidmap missing and apt-get install uidmap failed: %v: %s", err, tail(out))
		}
	}
	if _, err := user.Lookup(User); err != nil {
		out, err := exec.Command("useradd", "--system", "--user-group", "--no-create-home", "--home-dir", "/nonexistent",
			"--shell", "/usr/sbin/nologin", User).CombinedOutput()
		if err != nil {
			return fmt.Errorf("useradd %s: %v: %s", User, err, tail(out))
		}
	}
	for _, f := range []struct{ path, flag string }{{"/etc/subuid", "--add-subuids"}, {"/etc/subgid", "--add-subgids"}} {
		if hasEntry(f.path, fmt.Sprintf("%s:%d:%d", User, First, Last-First+1)) {
			continue
		}
		out, err := exec.Command("usermod", f.flag, fmt.Sprintf("%d-%d", First, Last), User).CombinedOutput()
		if err != nil {
			return fmt.Errorf("usermod %s: %v: %s", f.flag, err, tail(out))
		}
	}
	u, err := user.Lookup(User)
	if err != nil {
		return err
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := os.MkdirAll(LockDir, 0o700); err != nil {
		return err
	}
	return os.Chown(LockDir, uid, gid)
}

func hasEntry(path, line string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == line {
			return true
		}
	}
	return false
}

// delegate creates the cgroup and hands it to the user as systemd's
// Delegate=yes does: the directory and its cgroup.procs (and, on v2,
// cgroup.subtree_control and cgroup.threads) belong to the user.
func (h *Host) delegate(o Options) error {
	own, err := ownCgroups()
	if err != nil {
		return err
	}
	var st unix.Statfs_t
	mount := o.V2Mount
	if mount == "" && unix.Statfs(cgroupRoot, &st) == nil && st.Type == unix.CGROUP2_SUPER_MAGIC {
		mount = cgroupRoot
	}
	if mount != "" {
		ctrls := o.Controllers
		if len(ctrls) == 0 {
			ctrls = []string{"memory", "pids", "cpu"}
		}
		// Directly below the root cgroup, which may hold processes and
		// still hand controllers to its children.
		enable := "+" + strings.Join(ctrls, " +")
		if err := os.WriteFile(filepath.Join(mount, "cgroup.subtree_control"), []byte(enable), 0); err != nil {
			return fmt.Errorf("enable %s at the root of %s: %w", enable, mount, err)
		}
		dir := filepath.Join(mount, o.Name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			return err
		}
		h.V2Mount, h.Cgroups = mount, []string{dir}
		for _, f := range []string{"", "cgroup.procs", "cgroup.subtree_control", "cgroup.threads"} {
			if err := os.Chown(filepath.Join(dir, f), h.UID, h.GID); err != nil {
				return err
			}
		}
		return nil
	}
	for _, c := range v1Hierarchies {
		dir := filepath.Join(cgroupRoot, c, own[c], o.Name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			return err
		}
		h.Cgroups = append(h.Cgroups, dir)
		for _, f := range []string{"", "cgroup.procs", "tasks"} {
			if err := os.Chown(filepath.Join(dir, f), h.UID, h.GID); err != nil {
				return err
			}
		}
	}
	return nil
}

// ownCgroups reads /proc/self/cgroup: controller → path ("" for v2).
func ownCgroups() (map[string]string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(l, ":", 3)
		if len(parts) != 3 {
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			out[c] = parts[2]
		}
	}
	return out, nil
}

// removeCgroups kills every process left below the delegated cgroups
// (deepest first) and removes them.
func (h *Host) removeCgroups() error {
	var errs []error
	for _, top := range h.Cgroups {
		var dirs []string
		_ = filepath.WalkDir(top, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			if err := killAndRemove(dirs[i]); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

func killAndRemove(dir string) error {
	_ = os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0)
	var err error
	for i := 0; i < 500; i++ {
		b, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		for _, f := range strings.Fields(string(b)) {
			if pid, e := strconv.Atoi(f); e == nil {
				_ = unix.Kill(pid, unix.SIGKILL)
			}
		}
		if err = unix.Rmdir(dir); err == nil || errors.Is(err, unix.ENOENT) {
			return nil
		}
		unix.Nanosleep(&unix.Timespec{Nsec: 10e6}, nil)
	}
	return fmt.Errorf("remove %s: %w", dir, err)
}

// Env are the renderer settings for this host, plus the markers the tests
// read.
func (h *Host) Env() []string {
	env := []string{
		fmt.Sprintf("RENDER_CHILD_UID_RANGE=%d-%d", First, Last),
		"RENDER_CHILD_UID_LOCK_DIR=" + LockDir,
		EnvMarker + "=1",
	}
	if h.V2Mount != "" && h.V2Mount != cgroupRoot {
		env = append(env, EnvCgroupV2+"="+h.V2Mount)
	}
	return env
}

// Command runs argv as the user inside the delegated cgroup: a root shell
// moves itself into the cgroup (every hierarchy), then setpriv switches to
// the user with its primary and supplementary groups and executes argv. The
// caller sets Env (Env's variables included) and output.
func (h *Host) Command(argv ...string) *exec.Cmd {
	var script strings.Builder
	for _, d := range h.Cgroups {
		fmt.Fprintf(&script, "echo $$ > %s/cgroup.procs || exit 97\n", d)
	}
	nnp := ""
	if h.NoNewPrivs {
		nnp = "--no-new-privs "
	}
	if h.BoundingSetDrop != "" {
		nnp += "--bounding-set=" + h.BoundingSetDrop + " "
	}
	fmt.Fprintf(&script, "exec /usr/bin/setpriv --reuid=%d --regid=%d --init-groups %s-- \"$@\"\n", h.UID, h.GID, nnp)
	return exec.Command("/bin/sh", append([]string{"-c", script.String(), "unpriv"}, argv...)...)
}

// CopyExecutable copies the binary at path into a fresh directory the user
// (and the attempt users, which execute it as the shim's target) can read
// and execute; the test binary itself lives in a root-only build folder.
// remove deletes the copy.
func CopyExecutable(path string) (copyPath string, remove func(), err error) {
	dir, err := os.MkdirTemp("/tmp", "unpriv-bin-")
	if err != nil {
		return "", nil, err
	}
	remove = func() { os.RemoveAll(dir) }
	if err := os.Chmod(dir, 0o755); err != nil {
		remove()
		return "", nil, err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		remove()
		return "", nil, err
	}
	copyPath = filepath.Join(dir, filepath.Base(path))
	if err := os.WriteFile(copyPath, b, 0o755); err != nil {
		remove()
		return "", nil, err
	}
	return copyPath, remove, nil
}

func tail(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 1000 {
		s = s[len(s)-1000:]
	}
	return s
}
