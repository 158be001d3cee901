package router

import (
	"runtime/debug"
	"testing"
)

// TestTuneRuntime: the router's GC defaults apply unless the operator set the Go variables.
func TestTuneRuntime(t *testing.T) {
	oldPercent, oldLimit := debug.SetGCPercent(100), debug.SetMemoryLimit(-1)
	defer func() { debug.SetGCPercent(oldPercent); debug.SetMemoryLimit(oldLimit) }()
	for _, c := range []struct {
		name, gogc, limit string
		wantPercent       int
		wantLimit         int64
	}{
		{"defaults", "", "", DefaultGCPercent, DefaultMemoryLimit},
		{"operator's GOGC and GOMEMLIMIT kept", "150", "1GiB", 100, 1 << 62},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("GOGC", c.gogc)
			t.Setenv("GOMEMLIMIT", c.limit)
			debug.SetGCPercent(100)
			debug.SetMemoryLimit(1 << 62) // what the runtime read at start is not re-read: only TuneRuntime's change shows
			TuneRuntime()
			if got := debug.SetGCPercent(100); got != c.wantPercent {
				t.Errorf("GC percent %d, want %d", got, c.wantPercent)
			}
			if got := debug.SetMemoryLimit(-1); got != c.wantLimit {
				t.Errorf("memory limit %d, want %d", got, c.wantLimit)
			}
		})
	}
}
