package render

import (
	"context"
	"os"
	"strconv"
	"strings"

	"slidecells/shared/db"
)

// backendCPU reads the CPU time (user + system, in seconds) that the PostgreSQL backends
// behind the pools' idle connections have used, by process ID, from /proc: the server work of
// the dispatch transactions, which a busy host does not inflate the way it inflates wall-clock
// times (a waiting backend uses none). It returns nil when the server is not a local process
// this one can read (another host, another OS).
func backendCPU(ctx context.Context, pools ...*db.DB) map[uint32]float64 {
	out := map[uint32]float64{}
	for _, p := range pools {
		conns := p.Pool.AcquireAllIdle(ctx)
		for _, c := range conns {
			pid := c.Conn().PgConn().PID()
			cmd, err := os.ReadFile("/proc/" + strconv.Itoa(int(pid)) + "/cmdline")
			stat, err2 := os.ReadFile("/proc/" + strconv.Itoa(int(pid)) + "/stat")
			if err != nil || err2 != nil || !strings.Contains(string(cmd), "postgres") {
				for _, c := range conns {
					c.Release()
				}
				return nil
			}
			// Fields after the command's closing parenthesis: state is field 3, utime 14,
			// stime 15 (clock ticks of 1/100 s).
			f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
			if len(f) < 13 {
				continue
			}
			u, _ := strconv.ParseFloat(f[11], 64)
			s, _ := strconv.ParseFloat(f[12], 64)
			out[pid] = (u + s) / 100
		}
		for _, c := range conns {
			c.Release()
		}
	}
	return out
}

// cpuSpent is the CPU time the backends used between two backendCPU readings (a backend
// that appeared in between counts from zero); -1 when either reading is missing.
func cpuSpent(before, after map[uint32]float64) float64 {
	if before == nil || after == nil {
		return -1
	}
	total := 0.0
	for pid, t := range after {
		total += t - before[pid]
	}
	return total
}
