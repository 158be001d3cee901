package router

import (
	"errors"
	"math"
	"os"
	"runtime/debug"
	"testing"

	"github.com/KimMachineGun/automemlimit/memlimit"
)

// TestTuneRuntime: the soft memory limit follows the container's memory limit (times
// DefaultMemoryLimitRatio), is none without one, and the operator's GOGC and GOMEMLIMIT win.
func TestTuneRuntime(t *testing.T) {
	oldPercent, oldLimit := debug.SetGCPercent(100), debug.SetMemoryLimit(-1)
	defer func() { debug.SetGCPercent(oldPercent); debug.SetMemoryLimit(oldLimit) }()
	const unset = "\x00"
	for _, c := range []struct {
		name, gogc, limit, auto string
		provider                memlimit.Provider
		wantPercent             int
		wantLimit               int64
		wantSource              string
		wantErr                 bool
	}{
		// 5 GiB × 0.8 = 4 GiB exactly.
		{"container limit", unset, unset, unset, memlimit.Limit(5 << 30), DefaultGCPercent, 4 << 30, "cgroup", false},
		{"no container limit", unset, unset, unset, func() (uint64, error) { return 0, memlimit.ErrNoLimit }, DefaultGCPercent, math.MaxInt64, "none", false},
		{"no cgroup", unset, unset, unset, func() (uint64, error) { return 0, memlimit.ErrNoCgroup }, DefaultGCPercent, math.MaxInt64, "none", false},
		{"unreadable cgroup", unset, unset, unset, func() (uint64, error) { return 0, errors.New("permission denied") }, DefaultGCPercent, math.MaxInt64, "none", true},
		{"AUTOMEMLIMIT ratio", unset, unset, "0.5", memlimit.Limit(5 << 30), DefaultGCPercent, 5 << 29, "cgroup", false},
		{"bad AUTOMEMLIMIT", unset, unset, "2", memlimit.Limit(5 << 30), DefaultGCPercent, math.MaxInt64, "none", true},
		{"empty GOMEMLIMIT is unset", unset, "", unset, memlimit.Limit(5 << 30), DefaultGCPercent, 4 << 30, "cgroup", false},
		{"AUTOMEMLIMIT off", unset, unset, "off", memlimit.Limit(1 << 30), DefaultGCPercent, 1 << 62, "AUTOMEMLIMIT=off", false},
		{"operator's GOGC and GOMEMLIMIT kept", "150", "1GiB", unset, memlimit.Limit(1 << 30), 100, 1 << 62, "GOMEMLIMIT", false},
		{"GOMEMLIMIT=off kept", unset, "off", unset, memlimit.Limit(1 << 30), DefaultGCPercent, 1 << 62, "GOMEMLIMIT", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			for name, v := range map[string]string{"GOGC": c.gogc, "GOMEMLIMIT": c.limit, "AUTOMEMLIMIT": c.auto} {
				t.Setenv(name, "") // restored after the test
				if v == unset {
					unsetenv(t, name)
				} else {
					t.Setenv(name, v)
				}
			}
			debug.SetGCPercent(100)
			debug.SetMemoryLimit(1 << 62) // what the runtime read at start is not re-read: only tuneRuntime's change shows
			got := tuneRuntime(c.provider)
			if p := debug.SetGCPercent(100); p != c.wantPercent {
				t.Errorf("GC percent %d, want %d", p, c.wantPercent)
			}
			if l := debug.SetMemoryLimit(-1); l != c.wantLimit || got.Bytes != c.wantLimit {
				t.Errorf("memory limit %d (reported %d), want %d", l, got.Bytes, c.wantLimit)
			}
			if got.Source != c.wantSource || (got.Err != nil) != c.wantErr {
				t.Errorf("source %q err %v, want %q (error %v)", got.Source, got.Err, c.wantSource, c.wantErr)
			}
		})
	}
}

// unsetenv removes name for the rest of the test (t.Setenv has registered its restoration).
func unsetenv(t *testing.T, name string) {
	t.Helper()
	if err := os.Unsetenv(name); err != nil {
		t.Fatal(err)
	}
}
