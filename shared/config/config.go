// Package config is the one loader of static configuration: settings come from environment
// variables, each with a default, and every bad value is collected so a binary fails start-up
// with one message naming all bad settings. The router, the cell, cellctl, devstack and the
// renderer read their settings through it.
//
// It parses and checks the shape of single values (a duration, a host:port, a list of URLs);
// rules that relate settings to each other stay with the binary that has them.
package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"slices"
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

// PositiveDuration parses a Go duration that must be greater than zero.
func (l *Loader) PositiveDuration(name string, def time.Duration) time.Duration {
	v := l.get(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		l.Fail(name, "%q is not a duration greater than zero like 10s or 5m", v)
		return def
	}
	return d
}

// Addr reads a host:port listen or dial address.
func (l *Loader) Addr(name, def string, required bool) string {
	v := l.String(name, def, required)
	if v == "" {
		return v
	}
	if _, _, err := net.SplitHostPort(v); err != nil {
		l.Fail(name, "%q is not host:port", v)
	}
	return v
}

// URLs reads a comma-separated list of base URLs with one of schemes and a host, without the
// trailing slash. Empty items are skipped.
func (l *Loader) URLs(name string, schemes ...string) []string {
	var out []string
	for _, u := range strings.Split(l.get(name), ",") {
		if u = strings.TrimSpace(u); u == "" {
			continue
		}
		pu, err := url.Parse(u)
		if err != nil || !slices.Contains(schemes, pu.Scheme) || pu.Host == "" {
			l.Fail(name, "%q is not a %s base URL", u, strings.Join(schemes, " or "))
			continue
		}
		out = append(out, strings.TrimRight(u, "/"))
	}
	return out
}

// OneOf reads a setting that must be one of allowed (or empty, which gives def).
func (l *Loader) OneOf(name, def string, allowed ...string) string {
	v := l.get(name)
	if v == "" {
		return def
	}
	if !slices.Contains(allowed, v) {
		l.Fail(name, "%q is not one of %s", v, strings.Join(allowed, ", "))
		return def
	}
	return v
}

// LogLevel reads LOG_LEVEL, the level of every binary's logger.
func (l *Loader) LogLevel() string {
	return l.OneOf("LOG_LEVEL", "info", "debug", "info", "warn", "error")
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

// Seconds parses a number of seconds (fractions allowed) greater than zero and at most max.
func (l *Loader) Seconds(name string, def time.Duration, max float64) time.Duration {
	v := l.get(name)
	if v == "" {
		return def
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f <= 0 || f > max {
		l.Fail(name, "%q is not a number of seconds between 0 and %g", v, max)
		return def
	}
	return time.Duration(f * float64(time.Second))
}

// Positive parses a whole number greater than zero.
func (l *Loader) Positive(name string, def uint64) uint64 {
	v := l.get(name)
	if v == "" {
		return def
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil || n == 0 {
		l.Fail(name, "%q is not a positive whole number", v)
		return def
	}
	return n
}

// MinCredentialLength is the shortest service credential a credential file may hold.
const MinCredentialLength = 16

// Credentials reads the credential file the setting names: one credential per line (blank
// lines and surrounding space ignored), one of them, or two during a rotation (the first is the
// current one: the one a client sends), each at least MinCredentialLength characters. Unset
// gives nil (a failure when required). A bad file is reported without its content.
func (l *Loader) Credentials(name string, required bool) []string {
	path := l.String(name, "", required)
	if path == "" {
		return nil
	}
	b, err := os.ReadFile(path)
	var creds []string
	for _, line := range strings.Split(string(b), "\n") {
		if line = strings.TrimSpace(line); line != "" {
			creds = append(creds, line)
		}
	}
	short := slices.ContainsFunc(creds, func(c string) bool { return len(c) < MinCredentialLength })
	if err != nil || short || len(creds) == 0 || len(creds) > 2 {
		l.Fail(name, "unreadable, or not one credential per line (one, or two during a rotation) of at least %d characters each", MinCredentialLength)
		return nil
	}
	return creds
}

// Err returns every recorded problem, or nil.
func (l *Loader) Err() error {
	if len(l.errs) == 0 {
		return nil
	}
	return errors.New("invalid configuration: " + strings.Join(l.errs, "; "))
}
