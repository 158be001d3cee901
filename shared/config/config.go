// Package config is the one loader of static configuration: settings come from environment
// variables, each with a default, and every bad value is collected so a binary fails start-up
// with one message naming all bad settings.
package config

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// Loader reads settings and remembers what was wrong.
type Loader struct {
	// Getenv is the source; nil is os.Getenv.
	Getenv func(string) string
	errs   []string
}

func (l *Loader) get(name string) string {
	if l.Getenv != nil {
		return strings.TrimSpace(l.Getenv(name))
	}
	return strings.TrimSpace(os.Getenv(name))
}

// Fail records a bad setting.
func (l *Loader) Fail(name, format string, args ...any) {
	l.errs = append(l.errs, name+": "+fmt.Sprintf(format, args...))
}

// String returns the setting or def; required settings must be non-empty.
func (l *Loader) String(name, def string, required bool) string {
	v := l.get(name)
	if v == "" {
		v = def
	}
	if required && v == "" {
		l.Fail(name, "is required")
	}
	return v
}

// Duration parses a Go duration ("10s", "5m").
func (l *Loader) Duration(name string, def time.Duration) time.Duration {
	v := l.get(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		l.Fail(name, "%q is not a duration like 10s or 5m", v)
		return def
	}
	return d
}

// Int parses an integer within [min, max].
func (l *Loader) Int(name string, def, min, max int) int {
	v := l.get(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < min || n > max {
		l.Fail(name, "%q is not an integer between %d and %d", v, min, max)
		return def
	}
	return n
}

// Err returns every recorded problem, or nil.
func (l *Loader) Err() error {
	if len(l.errs) == 0 {
		return nil
	}
	return errors.New("invalid configuration: " + strings.Join(l.errs, "; "))
}
