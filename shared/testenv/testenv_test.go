package testenv

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

func TestRequiredFollowsCI(t *testing.T) {
	for v, want := range map[string]bool{"": false, "false": false, "true": true, "1": true} {
		t.Setenv("CI", v)
		if got := Required(); got != want {
			t.Errorf("CI=%q: Required() = %v, want %v", v, got, want)
		}
	}
}

// TestNeedFailsUnderCI runs this test binary again for TestNeedHelper: with CI set, an unmet
// requirement must fail the test; without it, skip it.
func TestNeedFailsUnderCI(t *testing.T) {
	if os.Getenv("TESTENV_HELPER") != "" {
		t.Skip("helper process only")
	}
	for ci, want := range map[string]string{"true": "--- FAIL: TestNeedHelper", "": "--- SKIP: TestNeedHelper"} {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestNeedHelper$", "-test.v")
		cmd.Env = append(os.Environ(), "TESTENV_HELPER=1", "CI="+ci)
		out, _ := cmd.CombinedOutput()
		if !strings.Contains(string(out), want) {
			t.Errorf("CI=%q: want %q in:\n%s", ci, want, out)
		}
	}
}

func TestNeedHelper(t *testing.T) {
	if os.Getenv("TESTENV_HELPER") == "" {
		t.Skip("helper process only")
	}
	Need(t, false, "a requirement this machine lacks")
}

func TestEventuallyWaitsForSuccess(t *testing.T) {
	n := 0
	Eventually(t, 10*time.Second, time.Millisecond, "the third try", func() error {
		if n++; n < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	if n != 3 {
		t.Fatalf("%d tries, want 3", n)
	}
}
