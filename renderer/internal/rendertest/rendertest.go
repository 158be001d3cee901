// Package rendertest holds the renderer's shared test helpers: browser and
// isolation requirements, a private cgroup parent and user ID pool per test, the
// egress path of an attempt, a service credential file and process-table
// checks. Only tests import it.
package rendertest

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"slidecells/shared/testenv"

	"slidecells/renderer/egress"
	"slidecells/renderer/internal/unpriv"
	"slidecells/renderer/supervisor"
)

// BrowserPath is Debian's Chromium binary (BrowserPath; not
// imported, so the chromium package's own tests can use this package).
const BrowserPath = "/usr/lib/chromium/chromium"

// RequireBrowser skips without Debian's Chromium, except under CI, where a
// missing browser fails the test.
func RequireBrowser(t testing.TB) {
	t.Helper()
	testenv.MustHaveChromium(t)
}

// RequireIsolation skips where the attempt isolation cannot be built: it
// needs root, or the prepared unprivileged user of an unpriv.RunTests run
// (a delegated cgroup and a subordinate ID range). CI runs as root, so there
// it fails.
func RequireIsolation(t testing.TB) {
	t.Helper()
	testenv.Need(t, os.Geteuid() == 0 || unpriv.Inside(),
		"the attempt isolation needs root, or the unprivileged run (TestUnprivileged) prepares a user and a delegated cgroup")
}

// UIDPool is the user ID pool of the tests: the default range as root, the
// prepared user's subordinate range in the unprivileged run. Leases are
// host-wide locks, so parallel tests never share an ID.
func UIDPool() supervisor.UIDPool {
	if unpriv.Inside() {
		return supervisor.UIDPool{First: unpriv.First, Last: unpriv.Last, LockDir: unpriv.LockDir}
	}
	return supervisor.UIDPool{First: supervisor.DefaultUIDFirst, Last: supervisor.DefaultUIDLast, LockDir: supervisor.DefaultUIDLockDir}
}

// Name is a unique name for per-test resources such as a cgroup.
func Name(prefix string) string {
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// Isolation gives a test its own cgroup parent and the user ID pool
// (UIDPool). The cgroup parent is emptied and removed at the end.
func Isolation(t testing.TB) (*supervisor.UIDPool, *supervisor.Cgroups) {
	t.Helper()
	RequireIsolation(t)
	cg, err := supervisor.OpenCgroups("", Name("slidecells-test-"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { RemoveCgroups(t, cg) })
	p := UIDPool()
	pool := &p
	if err := pool.Check(); err != nil {
		t.Fatal(err)
	}
	return pool, cg
}

// RemoveCgroups kills what is left below cg and removes it.
func RemoveCgroups(t testing.TB, cg *supervisor.Cgroups) {
	if n, err := cg.KillLeftovers(5 * time.Second); err != nil || n > 0 {
		t.Errorf("cgroup leftovers at the end of the test: %d processes, %v", n, err)
	}
	if err := cg.Close(); err != nil {
		t.Errorf("cgroup parent not removed: %v", err)
	}
}

// Egress serves the attempt's egress proxy for origins, like the renderer
// does; the proxy is sent to got, when not nil, for counting.
func Egress(origins []string, got chan<- *egress.Proxy) func(listen func(string, string) (net.Listener, error)) (io.Closer, error) {
	return func(listen func(string, string) (net.Listener, error)) (io.Closer, error) {
		p, err := egress.New(origins)
		if err != nil {
			return nil, err
		}
		ln, err := listen("tcp", egress.Addr)
		if err != nil {
			return nil, err
		}
		p.Serve(ln)
		if got != nil {
			got <- p
		}
		return p, nil
	}
}

// Credential writes a service credential file and returns its path and
// value.
func Credential(t testing.TB) (path, token string) {
	t.Helper()
	token = Name("svc-credential-")
	path = filepath.Join(t.TempDir(), "credential")
	if err := os.WriteFile(path, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, token
}

// ProcessesUnder lists processes whose command line or working directory
// lies under root: every Chromium process of an attempt names its profile
// directory there, and the child works there.
func ProcessesUnder(root string) []string {
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, ent := range ents {
		if _, err := strconv.Atoi(ent.Name()); err != nil {
			continue
		}
		cmd, _ := os.ReadFile("/proc/" + ent.Name() + "/cmdline")
		cwd, _ := os.Readlink("/proc/" + ent.Name() + "/cwd")
		if bytes.Contains(cmd, []byte(root)) || strings.HasPrefix(cwd, root) {
			out = append(out, ent.Name()+": "+strings.ReplaceAll(string(cmd), "\x00", " "))
		}
	}
	return out
}
