package unpriv

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"slidecells/shared/testenv"
)

// RunTests runs the named tests of the current test binary again, as the
// unprivileged user inside a delegated cgroup (o), and fails unless every
// one of them ran and passed there. The inner run sees Inside() true (and
// EnvCgroupV2 when o.V2Mount is set).
//
// Without root it skips (outside CI; in CI it fails, since CI runs as
// root); inside an inner run it skips, so it never recurses.
func RunTests(t *testing.T, o Options, tests ...string) {
	t.Helper()
	if Inside() || os.Getenv(EnvCgroupV2) != "" {
		t.Skip("already an inner run")
	}
	testenv.MustHaveRoot(t, "preparing an unprivileged user and a delegated cgroup")
	if o.Name == "" {
		// Unique per run: test binaries of several packages run at once.
		b := make([]byte, 4)
		_, _ = rand.Read(b)
		o.Name = "slidecells-unpriv-" + strings.ToLower(regexp.MustCompile(`[^A-Za-z0-9]+`).ReplaceAllString(t.Name(), "-")) + "-" + hex.EncodeToString(b)
	}
	h, cleanup, err := Prepare(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cleanup(); err != nil {
			t.Errorf("delegated cgroup: %v", err)
		}
	})
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin, remove, err := CopyExecutable(self)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(remove)
	cmd := h.Command(append([]string{bin}, testArgs(t, tests)...)...)
	cmd.Dir = "/"
	cmd.Env = append(withoutMarkers(os.Environ()), h.Env()...)
	check(t, fmt.Sprintf("unprivileged run as %s (uid %d) in %v", h.User, h.UID, h.Cgroups), cmd, tests)
}

// RunTestsOnCgroupV2 runs the named tests of the current test binary again
// as root, on the cgroup v2 mount given, with only the hugetlb controller
// (EnvCgroupV2), and fails unless every one of them ran and passed there.
func RunTestsOnCgroupV2(t *testing.T, mount string, tests ...string) {
	t.Helper()
	if Inside() || os.Getenv(EnvCgroupV2) != "" {
		t.Skip("already an inner run")
	}
	testenv.MustHaveRoot(t, "the attempt isolation")
	if err := os.WriteFile(mount+"/cgroup.subtree_control", []byte("+hugetlb"), 0); err != nil {
		t.Fatalf("enable hugetlb at the root of %s: %v", mount, err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, testArgs(t, tests)...)
	cmd.Env = append(withoutMarkers(os.Environ()), EnvCgroupV2+"="+mount)
	check(t, "run on cgroup v2 at "+mount, cmd, tests)
}

func testArgs(t *testing.T, tests []string) []string {
	timeout := 10 * time.Minute
	if d, ok := t.Deadline(); ok {
		timeout = time.Until(d) - 30*time.Second
	}
	return []string{"-test.run", "^(" + strings.Join(tests, "|") + ")$", "-test.v", "-test.count=1", "-test.timeout=" + timeout.String()}
}

// check runs cmd and requires every test to have passed.
func check(t *testing.T, what string, cmd *exec.Cmd, tests []string) {
	t.Helper()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	runErr := cmd.Run()
	text := out.String()
	var missing []string
	for _, name := range tests {
		if !strings.Contains(text, "--- PASS: "+name+" ") {
			missing = append(missing, name)
		}
	}
	if runErr != nil || len(missing) > 0 || strings.Contains(text, "--- SKIP") {
		t.Fatalf("%s: %v; not passed: %v\n%s", what, runErr, missing, text)
	}
	if testing.Verbose() {
		t.Logf("%s:\n%s", what, text)
	}
}

func withoutMarkers(env []string) []string {
	var out []string
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case EnvMarker, EnvCgroupV2:
			continue
		}
		out = append(out, kv)
	}
	return out
}
