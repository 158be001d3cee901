package failpoint

import (
	"errors"
	"os"
	"os/exec"
	"testing"
)

func TestParseAndHit(t *testing.T) {
	for _, tc := range []struct {
		name, spec string
		ok         bool
	}{
		{"empty", "", true},
		{"one error", "a.b=error", true},
		{"two", "a=error, b=crash", true},
		{"no action", "a", false},
		{"unknown action", "a=explode", false},
		{"no name", "=error", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(tc.spec)
			if (err == nil) != tc.ok {
				t.Fatalf("Parse(%q) = %v", tc.spec, err)
			}
		})
	}
	p, _ := Parse("a=error")
	if err := p.Hit("a"); !errors.Is(err, ErrInjected) {
		t.Fatalf("a: %v", err)
	}
	if err := p.Hit("b"); err != nil {
		t.Fatalf("b: %v", err)
	}
	if err := Points(nil).Hit("a"); err != nil {
		t.Fatalf("nil points: %v", err)
	}
}

func TestCrashKillsTheProcess(t *testing.T) {
	if os.Getenv("FAILPOINT_CHILD") == "1" {
		p, _ := Parse("x=crash")
		_ = p.Hit("x")
		os.Exit(0) // not reached
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashKillsTheProcess$")
	cmd.Env = append(os.Environ(), "FAILPOINT_CHILD=1")
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ProcessState.String() != "signal: killed" {
		t.Fatalf("child: %v", err)
	}
}
