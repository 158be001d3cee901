// Package testenv is the one place where a test decides what to do when this machine lacks what
// it needs (root, Debian's Chromium, node, the binaries `make build` leaves in SLIDECELLS_BIN, a
// cgroup layout), the one "succeeds soon" wait of the tests, and the fixtures several packages'
// tests share (BombPNG, NewCA, SlowRequest).
//
// Outside CI a missing requirement skips the test and says why. When CI is set (.ci/run exports
// it) the same requirement fails the test instead, so a CI run can never pass with a suite
// silently skipped. Only test code imports this package.
package testenv

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"slidecells/shared/loop"
)

// ChromiumPath is Debian's Chromium binary, the browser the renderer and the tests run.
const ChromiumPath = "/usr/lib/chromium/chromium"

// Required reports whether every requirement is mandatory: CI is set to anything but "" or
// "false".
func Required() bool {
	v := os.Getenv("CI")
	return v != "" && v != "false"
}

// Need skips the test with why when ok is false, or fails it when Required.
func Need(t testing.TB, ok bool, why string) {
	t.Helper()
	if ok {
		return
	}
	if Required() {
		t.Fatalf("CI requires this test to run, but: %s", why)
	}
	t.Skip(why)
}

// MustHaveRoot needs root; why says what the test does with it.
func MustHaveRoot(t testing.TB, why string) {
	t.Helper()
	Need(t, os.Geteuid() == 0, "needs root: "+why)
}

// MustHaveChromium needs Debian's Chromium and returns its path.
func MustHaveChromium(t testing.TB) string {
	t.Helper()
	_, err := os.Stat(ChromiumPath)
	Need(t, err == nil, "Chromium not installed at "+ChromiumPath+" (apt-get install chromium)")
	return ChromiumPath
}

// MustHaveNode needs node on PATH and returns its path.
func MustHaveNode(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("node")
	Need(t, err == nil, "node is not installed (apt-get install nodejs)")
	return p
}

// MustHaveBin needs the folder of built binaries in SLIDECELLS_BIN (make test sets it) with
// every binary named, and returns the folder.
func MustHaveBin(t testing.TB, names ...string) string {
	t.Helper()
	dir := os.Getenv("SLIDECELLS_BIN")
	Need(t, dir != "", "SLIDECELLS_BIN is unset (make test sets it to the built binaries)")
	for _, n := range names {
		_, err := os.Stat(filepath.Join(dir, n))
		Need(t, err == nil, "no "+n+" binary in SLIDECELLS_BIN="+dir+" (make build)")
	}
	return dir
}

// NotHere skips a test whose subject does not exist on this host (a cgroup v1 layout on a
// v2-only host, say), in CI too: running it is impossible, not merely unprepared.
func NotHere(t testing.TB, why string) {
	t.Helper()
	t.Skip("not applicable on this host: " + why)
}

// Eventually calls try every interval until it returns nil, and fails the test when it has not
// within timeout, naming what was awaited and try's last error.
func Eventually(t testing.TB, timeout, interval time.Duration, what string, try func() error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := loop.Until(ctx, interval, func(context.Context) error { return try() }); err != nil {
		t.Fatalf("%s: not within %v: %v", what, timeout, err)
	}
}
