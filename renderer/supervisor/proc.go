package supervisor

import (
	"bytes"
	"os"
	"strconv"
)

// procEntry is the part of /proc/<pid>/stat the supervisor needs.
type procEntry struct {
	pid    int
	ppid   int
	pgrp   int
	zombie bool
	// start is the start time in clock ticks since boot; with pid it
	// identifies a process across PID reuse.
	start uint64
}

// readStat parses /proc/<pid>/stat. The command name sits in parentheses and
// may itself contain spaces and parentheses, so fields are counted from the
// last ')'.
func readStat(pid int) (procEntry, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procEntry{}, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return procEntry{}, false
	}
	f := bytes.Fields(b[i+2:])
	// After the name: state(3) ppid(4) pgrp(5) ... starttime(22).
	if len(f) < 20 {
		return procEntry{}, false
	}
	ppid, err1 := strconv.Atoi(string(f[1]))
	pgrp, err2 := strconv.Atoi(string(f[2]))
	start, err3 := strconv.ParseUint(string(f[19]), 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return procEntry{}, false
	}
	return procEntry{pid: pid, ppid: ppid, pgrp: pgrp, start: start, zombie: len(f[0]) > 0 && (f[0][0] == 'Z' || f[0][0] == 'X')}, true
}

// listPIDs returns every PID visible in /proc.
func listPIDs() ([]int, error) {
	d, err := os.Open("/proc")
	if err != nil {
		return nil, err
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	pids := make([]int, 0, len(names))
	for _, n := range names {
		if pid, err := strconv.Atoi(n); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// hasEnvTag reports whether the process's initial environment holds tag
// ("KEY=value"). Processes that rewrite their environment block (Chromium's
// zygote children do, for their process titles) are found by process group
// instead; the tag catches those that left the group.
func hasEnvTag(pid int, tag []byte) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return false
	}
	for _, kv := range bytes.Split(b, []byte{0}) {
		if bytes.Equal(kv, tag) {
			return true
		}
	}
	return false
}

// members lists the processes that belong to the group: same process group,
// carrying the environment tag, or seen before (a zombie's environment can
// no longer be read, so a tagged process that died is remembered in seen).
func members(pgid int, tag []byte, seen map[procKey]bool) ([]procEntry, error) {
	pids, err := listPIDs()
	if err != nil {
		return nil, err
	}
	self := os.Getpid()
	var out []procEntry
	for _, pid := range pids {
		if pid == self {
			continue
		}
		e, ok := readStat(pid)
		if !ok {
			continue
		}
		k := procKey{pid, e.start}
		if e.pgrp == pgid || seen[k] || hasEnvTag(pid, tag) {
			if seen != nil {
				seen[k] = true
			}
			out = append(out, e)
		}
	}
	return out, nil
}

// procKey identifies a process across PID reuse.
type procKey struct {
	pid   int
	start uint64
}
