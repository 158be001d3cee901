package supervisor

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// CgroupLimits bound one attempt as a whole (every process of it together).
type CgroupLimits struct {
	// MemoryBytes bounds the memory of the whole attempt, page cache and
	// its temp file system included; swap is not allowed.
	MemoryBytes uint64
	// Processes bounds the number of processes and threads (pids.max).
	Processes uint64
	// CPUs bounds CPU time in cores (1.5 = one and a half cores).
	CPUs float64
}

// Defaults for CgroupLimits.
const (
	DefaultMemoryBytes = 2 << 30
	DefaultProcesses   = 512
	DefaultCPUs        = 2.0
)

// WithDefaults fills zero fields with the defaults.
func (l CgroupLimits) WithDefaults() CgroupLimits {
	if l.MemoryBytes == 0 {
		l.MemoryBytes = DefaultMemoryBytes
	}
	if l.Processes == 0 {
		l.Processes = DefaultProcesses
	}
	if l.CPUs == 0 {
		l.CPUs = DefaultCPUs
	}
	return l
}

// cgroupMount is where the cgroup file systems are mounted.
var cgroupMount = "/sys/fs/cgroup"

// v1Controllers are the cgroup v1 hierarchies the supervisor needs; the
// freezer lets it stop every process of a group before killing them.
var v1Controllers = []string{"memory", "pids", "cpu", "freezer"}

// v2Controllers must be available in the parent cgroup on cgroup v2; each
// attempt's limits are written to their files (v2Limits). Tests of the v2
// mechanics on hosts whose memory, pids and cpu controllers are bound to v1
// hierarchies replace it.
var v2Controllers = []string{"memory", "pids", "cpu"}

// Cgroups is the cgroup parent under which every attempt of this renderer
// gets its own group: on cgroup v2 one directory, on v1 one directory per
// controller hierarchy. Everything below it belongs to this renderer
// (one renderer instance per parent); start-up treats what it finds there as
// leftovers of an earlier epoch.
type Cgroups struct {
	v2 bool
	// dirs are the parent directories: one on v2, one per controller on
	// v1 (same order as v1Controllers).
	dirs []string
}

// OpenCgroups finds the cgroup hierarchy and creates the renderer's parent
// group name below the control process's own cgroup (or below parent, a
// path relative to each hierarchy's root, when set). It fails, saying what is
// missing, where the kernel offers neither cgroup v2 with the memory, pids
// and cpu controllers nor the v1 memory, pids, cpu and freezer hierarchies:
// there is no weaker mode.
func OpenCgroups(parent, name string) (*Cgroups, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(cgroupMount, &st); err != nil {
		return nil, fmt.Errorf("cgroups: %s is not mounted: %w", cgroupMount, err)
	}
	own, err := ownCgroups()
	if err != nil {
		return nil, err
	}
	if st.Type == unix.CGROUP2_SUPER_MAGIC {
		return openV2(parent, name, own[""])
	}
	var missing []string
	c := &Cgroups{}
	for _, ctrl := range v1Controllers {
		mnt := filepath.Join(cgroupMount, ctrl)
		var cst unix.Statfs_t
		if err := unix.Statfs(mnt, &cst); err != nil || cst.Type != unix.CGROUP_SUPER_MAGIC {
			missing = append(missing, ctrl)
			continue
		}
		base := own[ctrl]
		if parent != "" {
			base = parent
		}
		dir := filepath.Join(mnt, base, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("cgroups: create %s: %w%s", dir, err, delegationHint(false))
		}
		c.dirs = append(c.dirs, dir)
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("cgroups: neither cgroup v2 at %s nor the cgroup v1 hierarchies %s are mounted; attempts cannot be bounded", cgroupMount, strings.Join(missing, ", "))
	}
	return c, nil
}

func openV2(parent, name, own string) (*Cgroups, error) {
	base := own
	if path.Base(own) == controlLeaf {
		// Moved there by an earlier call: the renderer's cgroup is the
		// one above.
		base = path.Dir(own)
	}
	if parent != "" {
		base = parent
		// Unprivileged, a process may move another only within a
		// subtree whose common ancestor's cgroup.procs it may write:
		// the control process must live inside its delegated cgroup.
		if CurrentMode() == ModeUserNamespace && base != own && !strings.HasPrefix(own, strings.TrimSuffix(base, "/")+"/") {
			return nil, fmt.Errorf("cgroups: running unprivileged on cgroup v2, the renderer must run inside its delegated cgroup %s, not in %s (systemd: Delegate=yes and leave RENDER_CGROUP_PARENT unset)", base, own)
		}
	}
	baseDir := filepath.Join(cgroupMount, base)
	avail, err := os.ReadFile(filepath.Join(baseDir, "cgroup.controllers"))
	if err != nil {
		return nil, fmt.Errorf("cgroups: %w", err)
	}
	for _, c := range v2Controllers {
		if !containsWord(string(avail), c) {
			return nil, fmt.Errorf("cgroups: controller %q is not delegated to %s (available: %s)", c, baseDir, strings.TrimSpace(string(avail)))
		}
	}
	if err := unix.Access(filepath.Join(baseDir, "cgroup.procs"), unix.W_OK); err != nil {
		return nil, fmt.Errorf("cgroups: %s is not writable: %w%s", baseDir, err, delegationHint(true))
	}
	enable := ""
	if len(v2Controllers) > 0 {
		enable = "+" + strings.Join(v2Controllers, " +")
	}
	if err := os.WriteFile(filepath.Join(baseDir, "cgroup.subtree_control"), []byte(enable), 0); err != nil {
		// "No internal processes": a cgroup with processes cannot hand
		// controllers to its children. Move the control process into
		// a leaf of its own first, then try again.
		leaf := filepath.Join(baseDir, controlLeaf)
		if mkErr := os.MkdirAll(leaf, 0o755); mkErr != nil {
			return nil, fmt.Errorf("cgroups: enable %s in %s: %w", enable, baseDir, err)
		}
		if mvErr := os.WriteFile(filepath.Join(leaf, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0); mvErr != nil {
			return nil, fmt.Errorf("cgroups: move the control process to %s: %w", leaf, mvErr)
		}
		if err := os.WriteFile(filepath.Join(baseDir, "cgroup.subtree_control"), []byte(enable), 0); err != nil {
			return nil, fmt.Errorf("cgroups: enable %s in %s: %w", enable, baseDir, err)
		}
	}
	dir := filepath.Join(baseDir, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("cgroups: create %s: %w%s", dir, err, delegationHint(true))
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte(enable), 0); err != nil {
		return nil, fmt.Errorf("cgroups: enable %s in %s: %w", enable, dir, err)
	}
	return &Cgroups{v2: true, dirs: []string{dir}}, nil
}

// delegationHint says how a host gives the renderer its cgroup.
func delegationHint(v2 bool) string {
	if CurrentMode() == ModeRoot {
		return " (the renderer needs write access to its cgroup)"
	}
	if v2 {
		return fmt.Sprintf(" (running unprivileged: the renderer must run in a cgroup v2 directory delegated to user %d — owner of the directory and of its cgroup.procs, cgroup.subtree_control and cgroup.threads, as systemd's Delegate=yes does)", os.Getuid())
	}
	return fmt.Sprintf(" (running unprivileged: the directory RENDER_CGROUP_PARENT names, or the renderer's own cgroup, must be owned by user %d in each of the %s hierarchies)", os.Getuid(), strings.Join(v1Controllers, ", "))
}

// controlLeaf is the leaf cgroup v2 the control process moves itself into
// so that its own cgroup, holding no process, can hand controllers down.
const controlLeaf = "control"

func containsWord(list, w string) bool {
	for _, f := range strings.Fields(list) {
		if f == w {
			return true
		}
	}
	return false
}

// ownCgroups reads /proc/self/cgroup: controller → path ("" for v2).
func ownCgroups() (map[string]string, error) {
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return nil, fmt.Errorf("cgroups: %w", err)
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[1] == "" {
			out[""] = parts[2]
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			out[c] = parts[2]
		}
	}
	return out, sc.Err()
}

// Dirs are the parent directories (for logs and docs).
func (c *Cgroups) Dirs() []string { return append([]string(nil), c.dirs...) }

// Cgroup is the group of one attempt.
type Cgroup struct {
	v2   bool
	dirs []string
}

// Create makes the group name with limits l.
func (c *Cgroups) Create(name string, l CgroupLimits) (*Cgroup, error) {
	return c.create(name, l, 0)
}

// create makes the group name with limits l; standbyCPUs > 0 caps its CPU at
// that many cores instead of l.CPUs, at the lowest weight (a standby).
func (c *Cgroups) create(name string, l CgroupLimits, standbyCPUs float64) (*Cgroup, error) {
	g := &Cgroup{v2: c.v2}
	for _, d := range c.dirs {
		dir := filepath.Join(d, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			_ = g.Remove()
			return nil, fmt.Errorf("cgroups: %w", err)
		}
		g.dirs = append(g.dirs, dir)
	}
	if err := g.limit(l.WithDefaults(), standbyCPUs); err != nil {
		_ = g.Remove()
		return nil, err
	}
	return g, nil
}

// cpuPeriod is the CFS period of every group's CPU cap, in microseconds.
const cpuPeriod = 100000

// The CPU weights of a standby (the lowest the kernel accepts) and of an
// attempt (the kernel's default, as every other group of the host has): on
// cgroup v2 cpu.weight, on v1 cpu.shares.
const (
	standbyWeightV2, attemptWeightV2 = "1", "100"
	standbyWeightV1, attemptWeightV1 = "2", "1024"
)

// limit writes l; standbyCPUs > 0 caps the CPU at that many cores, at the
// lowest weight, instead of l.CPUs.
func (g *Cgroup) limit(l CgroupLimits, standbyCPUs float64) error {
	mem := strconv.FormatUint(l.MemoryBytes, 10)
	pids := strconv.FormatUint(l.Processes, 10)
	var writes [][2]string
	if g.v2 {
		d := g.dirs[0]
		for _, c := range v2Controllers {
			switch c {
			case "memory":
				writes = append(writes, [2]string{filepath.Join(d, "memory.max"), mem}, [2]string{filepath.Join(d, "memory.swap.max"), "0"})
			case "pids":
				writes = append(writes, [2]string{filepath.Join(d, "pids.max"), pids})
			}
		}
	} else {
		mem1, pids1, cpu1 := g.dirs[0], g.dirs[1], g.dirs[2]
		writes = [][2]string{
			{filepath.Join(mem1, "memory.limit_in_bytes"), mem},
			{filepath.Join(mem1, "memory.memsw.limit_in_bytes"), mem},
			{filepath.Join(pids1, "pids.max"), pids},
			{filepath.Join(cpu1, "cpu.cfs_period_us"), strconv.Itoa(cpuPeriod)},
		}
	}
	if g.hasCPU() {
		if standbyCPUs > 0 {
			writes = append(writes, g.cpuCap(standbyCPUs), g.cpuWeight(true))
		} else {
			// A new group has the default weight already.
			writes = append(writes, g.cpuCap(l.CPUs))
		}
	}
	return writeAll(writes)
}

// hasCPU is false on a v2 hierarchy without the cpu controller (tests of
// the v2 mechanics on a hybrid host).
func (g *Cgroup) hasCPU() bool {
	return !g.v2 || slices.Contains(v2Controllers, "cpu")
}

// cpuCap is the file and value that cap the group at cpus cores.
func (g *Cgroup) cpuCap(cpus float64) [2]string {
	quota := strconv.FormatInt(int64(cpus*cpuPeriod), 10)
	if g.v2 {
		return [2]string{filepath.Join(g.dirs[0], "cpu.max"), quota + " " + strconv.Itoa(cpuPeriod)}
	}
	return [2]string{filepath.Join(g.dirs[2], "cpu.cfs_quota_us"), quota}
}

// cpuWeight is the file and value that give the group a standby's weight
// or an attempt's.
func (g *Cgroup) cpuWeight(standby bool) [2]string {
	if g.v2 {
		w := attemptWeightV2
		if standby {
			w = standbyWeightV2
		}
		return [2]string{filepath.Join(g.dirs[0], "cpu.weight"), w}
	}
	w := attemptWeightV1
	if standby {
		w = standbyWeightV1
	}
	return [2]string{filepath.Join(g.dirs[2], "cpu.shares"), w}
}

// raiseCPU gives a standby's group an attempt's CPU: the cap of cpus cores
// and the default weight.
func (g *Cgroup) raiseCPU(cpus float64) error {
	if !g.hasCPU() {
		return nil
	}
	return writeAll([][2]string{g.cpuCap(cpus), g.cpuWeight(false)})
}

// writeAll writes each value to its cgroup file, in order.
func writeAll(writes [][2]string) error {
	for _, w := range writes {
		if err := os.WriteFile(w[0], []byte(w[1]), 0); err != nil {
			if errors.Is(err, os.ErrNotExist) && (strings.HasSuffix(w[0], "memsw.limit_in_bytes") || strings.HasSuffix(w[0], "swap.max")) {
				continue // kernel without swap accounting: nothing to bound
			}
			return fmt.Errorf("cgroups: set %s: %w", w[0], err)
		}
	}
	return nil
}

// Add moves pid into every hierarchy of the group.
func (g *Cgroup) Add(pid int) error {
	for _, d := range g.dirs {
		if err := os.WriteFile(filepath.Join(d, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
			return fmt.Errorf("cgroups: add %d to %s: %w", pid, d, err)
		}
	}
	return nil
}

// Procs lists the processes in the group (the union over hierarchies).
func (g *Cgroup) Procs() ([]int, error) {
	seen := map[int]bool{}
	var out []int
	for _, d := range g.dirs {
		b, err := os.ReadFile(filepath.Join(d, "cgroup.procs"))
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			return nil, err
		}
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil && !seen[pid] {
				seen[pid] = true
				out = append(out, pid)
			}
		}
	}
	return out, nil
}

// Kill kills every process of the group: cgroup.kill on v2; on v1 the
// freezer stops them all first, so none can fork while being killed.
func (g *Cgroup) Kill() error {
	if g.v2 {
		if err := os.WriteFile(filepath.Join(g.dirs[0], "cgroup.kill"), []byte("1"), 0); err == nil {
			return nil
		}
	}
	var freezer string
	if !g.v2 {
		freezer = g.dirs[3]
		_ = os.WriteFile(filepath.Join(freezer, "freezer.state"), []byte("FROZEN"), 0)
		for i := 0; i < 100; i++ {
			b, _ := os.ReadFile(filepath.Join(freezer, "freezer.state"))
			if strings.TrimSpace(string(b)) == "FROZEN" {
				break
			}
			time.Sleep(time.Millisecond)
		}
	}
	pids, err := g.Procs()
	for _, p := range pids {
		_ = unix.Kill(p, unix.SIGKILL)
	}
	if freezer != "" {
		_ = os.WriteFile(filepath.Join(freezer, "freezer.state"), []byte("THAWED"), 0)
	}
	return err
}

// Empty reports whether no process is left in the group.
func (g *Cgroup) Empty() (bool, error) {
	p, err := g.Procs()
	return len(p) == 0, err
}

// Remove deletes the group's directories; it fails while processes remain.
func (g *Cgroup) Remove() error {
	var errs []error
	for _, d := range g.dirs {
		if err := unix.Rmdir(d); err != nil && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("cgroups: remove %s: %w", d, err))
		}
	}
	return errors.Join(errs...)
}

// OOMKills counts the processes the kernel killed at the group's memory
// limit: the oom_kill counter of memory.events (v2) or memory.oom_control
// (v1).
func (g *Cgroup) OOMKills() int {
	file := "memory.oom_control"
	if g.v2 {
		file = "memory.events"
	}
	b, _ := os.ReadFile(filepath.Join(g.dirs[0], file))
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) == 2 && f[0] == "oom_kill" {
			n, _ := strconv.Atoi(f[1])
			return n
		}
	}
	return 0
}

// killUntilEmpty kills every process of the group, again and again, until
// none is left or the deadline has passed (it always tries at least once).
// It returns how many processes the group held at the first look, and an
// error when some survive the deadline.
func (g *Cgroup) killUntilEmpty(deadline time.Time) (int, error) {
	first := -1
	wait := time.Millisecond
	for {
		pids, err := g.Procs()
		if err == nil {
			if first < 0 {
				first = len(pids)
			}
			if len(pids) == 0 {
				return first, nil
			}
		}
		_ = g.Kill()
		if time.Now().After(deadline) {
			if err == nil {
				err = fmt.Errorf("cgroups: %d processes survive in %s", len(pids), g.dirs[0])
			}
			return max(first, 0), err
		}
		time.Sleep(wait)
		// At most 4 ms between looks: the teardown is on the attempt's path (its terminal
		// receipt waits for the empty group), and a browser's processes take ~30 ms to go,
		// so a wider step overshoots the moment the last one was gone by up to as much
		// (128 ms before issue #24, then 16 ms). A look reads one small cgroup file.
		if wait < 4*time.Millisecond {
			wait *= 2
		}
	}
}

// Leftovers are the groups found below the parent: attempts of an earlier
// epoch of this renderer.
func (c *Cgroups) Leftovers() []*Cgroup {
	names := map[string]bool{}
	for _, d := range c.dirs {
		ents, _ := os.ReadDir(d)
		for _, e := range ents {
			if e.IsDir() && (!c.v2 || e.Name() != controlLeaf) {
				names[e.Name()] = true
			}
		}
	}
	var out []*Cgroup
	for n := range names {
		g := &Cgroup{v2: c.v2}
		for _, d := range c.dirs {
			g.dirs = append(g.dirs, filepath.Join(d, n))
		}
		out = append(out, g)
	}
	return out
}

// KillLeftovers kills every process of every leftover group, waits until
// the groups are empty and removes them. It returns how many processes it
// killed; an error means something is left (start-up must not continue).
func (c *Cgroups) KillLeftovers(timeout time.Duration) (int, error) {
	killed := 0
	deadline := time.Now().Add(timeout)
	for _, g := range c.Leftovers() {
		n, err := g.killUntilEmpty(deadline)
		killed += n
		if err != nil {
			return killed, fmt.Errorf("cgroups: an earlier epoch's processes survive: %w", err)
		}
		if err := g.Remove(); err != nil {
			return killed, err
		}
	}
	return killed, nil
}

// Close removes the parent directories; it fails while groups remain.
func (c *Cgroups) Close() error {
	var errs []error
	for _, d := range c.dirs {
		if err := unix.Rmdir(d); err != nil && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
