// Package failpoint injects faults at named points of a process, for fault tests of a real
// binary (a kill -9 between a commit and its answer, say). Production leaves it unset; every
// point is then a no-op.
//
// A specification is a comma-separated list of name=action, where action is
//   - error: the point fails with an error, every time;
//   - crash: the process sends itself SIGKILL at the point (no deferred code, no flush), like a
//     power cut or the OOM killer.
package failpoint

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
)

// ErrInjected is the error of an "error" action.
var ErrInjected = errors.New("failpoint: injected error")

// Points is a parsed specification; the zero value injects nothing.
type Points map[string]string

// Parse reads a specification. Names are not checked against a list: a point that no code
// consults is simply never reached.
func Parse(spec string) (Points, error) {
	p := Points{}
	for _, item := range strings.Split(spec, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, action, ok := strings.Cut(item, "=")
		if !ok || name == "" {
			return nil, fmt.Errorf("%q: want name=action", item)
		}
		if action != "error" && action != "crash" {
			return nil, fmt.Errorf("%q: action must be error or crash", item)
		}
		p[name] = action
	}
	return p, nil
}

// Hit is called at the point name: it returns ErrInjected, kills the process, or returns nil.
func (p Points) Hit(name string) error {
	switch p[name] {
	case "error":
		return fmt.Errorf("%w at %s", ErrInjected, name)
	case "crash":
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // the signal is on its way
	}
	return nil
}
