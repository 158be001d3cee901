package maintenance

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// purger answers Purge calls from a script of batch sizes (and an optional error at the end).
type purger struct {
	mu     sync.Mutex
	sizes  []int
	err    error
	limits []int
}

func (p *purger) Purge(_ context.Context, limit int) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.limits = append(p.limits, limit)
	if len(p.sizes) == 0 {
		return 0, p.err
	}
	n := p.sizes[0]
	p.sizes = p.sizes[1:]
	return n, nil
}

func (p *purger) calls() int { p.mu.Lock(); defer p.mu.Unlock(); return len(p.limits) }

type sweeper struct {
	mu      sync.Mutex
	cutoffs []time.Time
	n       int
	err     error
	round   chan struct{} // receives after each call, when not nil
}

func (s *sweeper) SweepTemp(_ context.Context, cutoff time.Time) (int, error) {
	s.mu.Lock()
	s.cutoffs = append(s.cutoffs, cutoff)
	s.mu.Unlock()
	if s.round != nil {
		s.round <- struct{}{}
	}
	return s.n, s.err
}

var now = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

func TestRoundPurgesInBatchesUntilAShortOne(t *testing.T) {
	t.Parallel()
	core, logs := observer.New(zap.InfoLevel)
	p := &purger{sizes: []int{10, 10, 3, 10}}
	s := &sweeper{n: 2}
	r := New(Config{Idempotency: p, Temps: s, Log: zap.New(core), PurgeBatch: 10, Now: func() time.Time { return now }})
	r.Round(context.Background())
	if p.calls() != 3 {
		t.Errorf("%d purge calls, want 3 (two full batches, one short)", p.calls())
	}
	for _, l := range p.limits {
		if l != 10 {
			t.Errorf("purge limit %d, want 10", l)
		}
	}
	if len(s.cutoffs) != 1 || !s.cutoffs[0].Equal(now.Add(-DefaultTempAfter)) {
		t.Errorf("sweep cutoffs %v, want one at now - %v", s.cutoffs, DefaultTempAfter)
	}
	if got := logs.FilterMessage("idempotency records purged").All(); len(got) != 1 || got[0].ContextMap()["count"] != int64(23) {
		t.Errorf("purge log %v, want one line with count 23", got)
	}
	if got := logs.FilterMessage("temporary blobs swept").Len(); got != 1 {
		t.Errorf("%d sweep log lines, want 1", got)
	}
}

func TestFailuresAreLoggedAndDoNotStopTheOtherTask(t *testing.T) {
	t.Parallel()
	core, logs := observer.New(zap.InfoLevel)
	p := &purger{sizes: []int{500}, err: errors.New("db down")}
	s := &sweeper{err: errors.New("bucket down")}
	New(Config{Idempotency: p, Temps: s, Log: zap.New(core)}).Round(context.Background())
	if p.calls() != 2 {
		t.Errorf("%d purge calls, want 2 (a full batch, then the error)", p.calls())
	}
	if len(s.cutoffs) != 1 {
		t.Errorf("the sweep did not run after the purge failed")
	}
	for _, msg := range []string{"idempotency purge failed", "temporary blob sweep failed"} {
		if logs.FilterMessage(msg).Len() != 1 {
			t.Errorf("no %q line", msg)
		}
	}
}

func TestRunRoundsOnTicksAndStopsWithTheContext(t *testing.T) {
	t.Parallel()
	tick := make(chan time.Time)
	stopped := make(chan struct{})
	var interval time.Duration
	s := &sweeper{round: make(chan struct{})}
	r := New(Config{Temps: s, Interval: 7 * time.Minute, Ticker: func(d time.Duration) (<-chan time.Time, func()) {
		interval = d
		return tick, func() { close(stopped) }
	}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	for i := range 3 {
		select {
		case tick <- now:
		case <-time.After(10 * time.Second):
			t.Fatalf("tick %d not taken within 10s", i)
		}
		select {
		case <-s.round:
		case <-time.After(10 * time.Second):
			t.Fatalf("no round after tick %d within 10s", i)
		}
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return within 10s of the context ending")
	}
	select {
	case <-stopped:
	default:
		t.Error("the ticker was not stopped")
	}
	if interval != 7*time.Minute {
		t.Errorf("ticker interval %v, want 7m", interval)
	}
}

func TestNilTasksAreSkipped(t *testing.T) {
	t.Parallel()
	New(Config{}).Round(context.Background()) // must not panic
}
