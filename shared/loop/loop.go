// Package loop runs background rounds: a function called at a fixed interval until its context
// ends. It is the one ticker loop of the binaries' periodic work (lease renewal and rescue of
// mutation jobs, the render coordinator's worker refresh and reconciliation, the cell's
// maintenance, the router's cell-list refresh and probes), with the ticker injectable so that a
// test decides when a round runs instead of waiting for the clock.
//
// It holds no business rule and no error policy: a round logs or records its own failures.
package loop

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Ticker starts a ticker of period d and returns its channel and the function that stops it.
type Ticker func(d time.Duration) (c <-chan time.Time, stop func())

// Real is time.NewTicker as a Ticker.
func Real(d time.Duration) (<-chan time.Time, func()) {
	t := time.NewTicker(d)
	return t.C, t.Stop
}

// Every calls round every d until ctx ends, the first time one d after it starts; tick makes
// the ticker (nil: Real). A round runs to its end before the next is considered, and ticks that
// come meanwhile are dropped as time.Ticker drops them, so rounds never overlap or pile up.
// Every returns when ctx ends, after stopping the ticker.
func Every(ctx context.Context, d time.Duration, tick Ticker, round func(context.Context)) {
	if tick == nil {
		tick = Real
	}
	c, stop := tick(d)
	defer stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-c:
			// A tick and the end of ctx can be ready together; the end wins.
			if ctx.Err() != nil {
				return
			}
			round(ctx)
		}
	}
}

// Until calls try every interval, the first time at once, until it returns nil or ctx ends. It
// is the one "succeeds soon" poll of the binaries and the tests (testenv.Eventually wraps it):
// bounded by ctx, never faster than interval, and when ctx ends the error says what was last
// wrong, so a timed-out wait explains itself. A try that returns Stop(err) ends the wait at
// once with err (what was awaited can no longer happen: the process exited, say).
func Until(ctx context.Context, interval time.Duration, try func(context.Context) error) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		err := try(ctx)
		if err == nil {
			return nil
		}
		var s stop
		if errors.As(err, &s) {
			return s.err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), err)
		case <-t.C:
		}
	}
}

// Stop makes err end an Until wait at once.
func Stop(err error) error { return stop{err} }

type stop struct{ err error }

func (s stop) Error() string { return s.err.Error() }
func (s stop) Unwrap() error { return s.err }
