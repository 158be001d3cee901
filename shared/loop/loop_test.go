package loop

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// fakeTicker is a Ticker whose ticks the test sends; it records the period asked for and
// whether the ticker was stopped.
type fakeTicker struct {
	c       chan time.Time
	period  time.Duration
	stopped atomic.Bool
}

func (f *fakeTicker) start(d time.Duration) (<-chan time.Time, func()) {
	f.period = d
	return f.c, func() { f.stopped.Store(true) }
}

// within fails the test when ch gives nothing within a generous bound (a hang, not a speed
// check).
func within[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: nothing within 10s", what)
		panic("unreachable")
	}
}

func TestEveryRunsOneRoundPerTickUntilItsContextEnds(t *testing.T) {
	t.Parallel()
	ft := &fakeTicker{c: make(chan time.Time)}
	rounds := make(chan context.Context)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		Every(ctx, 7*time.Minute, ft.start, func(rctx context.Context) { rounds <- rctx })
		close(done)
	}()
	for i := range 3 {
		within(t, sendTick(ft.c), "tick taken")
		if rctx := within(t, rounds, "round after a tick"); rctx.Err() != nil {
			t.Fatalf("round %d got an ended context", i)
		}
	}
	select {
	case r := <-rounds:
		t.Fatalf("a round without a tick: %v", r)
	default:
	}
	cancel()
	within(t, done, "Every returns once its context ended")
	if !ft.stopped.Load() {
		t.Error("the ticker was not stopped")
	}
	if ft.period != 7*time.Minute {
		t.Errorf("ticker period %v, want 7m", ft.period)
	}
}

// sendTick sends one tick and reports on the returned channel once it was taken.
func sendTick(c chan time.Time) <-chan struct{} {
	taken := make(chan struct{})
	go func() { c <- time.Now(); close(taken) }()
	return taken
}

func TestEveryRunsNoRoundOnceItsContextEnded(t *testing.T) {
	t.Parallel()
	ft := &fakeTicker{c: make(chan time.Time, 1)}
	ft.c <- time.Now() // a tick is ready, and so is the end of the context
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var ran atomic.Int32
	Every(ctx, time.Second, ft.start, func(context.Context) { ran.Add(1) })
	if n := ran.Load(); n != 0 {
		t.Fatalf("%d rounds after the context ended", n)
	}
	if !ft.stopped.Load() {
		t.Error("the ticker was not stopped")
	}
}

func TestEveryWithoutATickerUsesTheClock(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	rounds := make(chan struct{}, 1)
	done := make(chan struct{})
	go func() {
		Every(ctx, time.Millisecond, nil, func(context.Context) {
			select {
			case rounds <- struct{}{}:
			default:
			}
		})
		close(done)
	}()
	for range 3 {
		within(t, rounds, "a round of the real ticker")
	}
	cancel()
	within(t, done, "Every returns once its context ended")
}

func TestUntilReturnsOnSuccessAndNamesTheLastErrorWhenItsContextEnds(t *testing.T) {
	t.Parallel()
	n := 0
	if err := Until(context.Background(), time.Millisecond, func(context.Context) error {
		if n++; n < 3 {
			return errors.New("not yet")
		}
		return nil
	}); err != nil || n != 3 {
		t.Fatalf("Until = %v after %d tries, want nil after 3", err, n)
	}
	gone := errors.New("exited")
	if err := Until(context.Background(), time.Millisecond, func(context.Context) error { return Stop(gone) }); err != gone {
		t.Fatalf("Until = %v, want the stopping error itself", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	err := Until(ctx, time.Millisecond, func(context.Context) error { return errors.New("still down") })
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "still down") {
		t.Fatalf("Until = %v, want the deadline and the last error", err)
	}
}
