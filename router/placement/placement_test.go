package placement

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"slidecells/shared/ids"
)

// Workspace IDs of the tests: the cache keeps canonical IDs only (ids.Bytes).
var (
	ws1   = ids.New(ids.Workspace)
	wsNew = ids.New(ids.Workspace)
)

// source is a fake directory: a map, an error switch, a call counter and an optional gate that
// holds every query until it is closed.
type source struct {
	mu    sync.Mutex
	m     map[string]Placement
	err   error
	gate  chan struct{}
	calls atomic.Int32
}

func (s *source) Placement(ctx context.Context, ws string) (Placement, error) {
	s.calls.Add(1)
	s.mu.Lock()
	gate := s.gate
	s.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return Placement{}, ctx.Err()
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return Placement{}, s.err
	}
	p, ok := s.m[ws]
	if !ok {
		return Placement{}, ErrNotFound
	}
	return p, nil
}

func (s *source) set(ws string, p Placement) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[ws] = p
}

func (s *source) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.err = err
}

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *clock) Advance(d time.Duration) { c.mu.Lock(); defer c.mu.Unlock(); c.t = c.t.Add(d) }

type bundle struct {
	src   *source
	clock *clock
	cache *Cache
}

func setup(t *testing.T) *bundle {
	t.Helper()
	b := &bundle{src: &source{m: map[string]Placement{}}, clock: &clock{t: time.Unix(1_900_000_000, 0)}}
	c, err := New(b.src, Config{TTL: 30 * time.Second, MaxStale: 5 * time.Minute, NegativeTTL: 5 * time.Second, Now: b.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	b.cache = c
	return b
}

func (b *bundle) lookup(t *testing.T, ws string) (Placement, Outcome, error) {
	t.Helper()
	return b.cache.Lookup(context.Background(), ws)
}

func TestFreshHitDoesNotAskSource(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.src.set(ws1, Placement{CellID: "cell-a", Epoch: 3})
	if p, o, err := b.lookup(t, ws1); err != nil || p.CellID != "cell-a" || p.Epoch != 3 || o != Miss {
		t.Fatalf("first lookup = %+v %v %v", p, o, err)
	}
	b.clock.Advance(29 * time.Second)
	if _, o, _ := b.lookup(t, ws1); o != Hit {
		t.Fatalf("within TTL: %v, want hit", o)
	}
	if n := b.src.calls.Load(); n != 1 {
		t.Errorf("source asked %d times, want 1", n)
	}
	b.clock.Advance(2 * time.Second)
	b.src.set(ws1, Placement{CellID: "cell-b", Epoch: 4})
	if p, o, _ := b.lookup(t, ws1); o != Refreshed || p.CellID != "cell-b" {
		t.Fatalf("after TTL: %+v %v, want refreshed to cell-b", p, o)
	}
}

func TestStaleIfError(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.src.set(ws1, Placement{CellID: "cell-a", Epoch: 1})
	b.lookup(t, ws1)
	b.src.fail(errors.New("connection refused"))

	b.clock.Advance(time.Minute)
	if p, o, err := b.lookup(t, ws1); err != nil || o != StaleServed || p.CellID != "cell-a" {
		t.Fatalf("stale lookup = %+v %v %v", p, o, err)
	}
	calls := b.src.calls.Load()
	b.clock.Advance(DefaultStaleRetry / 2)
	if _, o, _ := b.lookup(t, ws1); o != StaleServed || b.src.calls.Load() != calls {
		t.Errorf("within StaleRetry: %v and %d new calls, want stale_served without asking", o, b.src.calls.Load()-calls)
	}
	b.clock.Advance(DefaultStaleRetry)
	b.lookup(t, ws1)
	if b.src.calls.Load() != calls+1 {
		t.Errorf("after StaleRetry the source was not asked again")
	}

	b.clock.Advance(4*time.Minute - 2*DefaultStaleRetry + time.Second) // just past MaxStale
	if _, _, err := b.lookup(t, ws1); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("past MaxStale: %v, want ErrUnavailable", err)
	}
	b.src.fail(nil)
	if p, _, err := b.lookup(t, ws1); err != nil || p.CellID != "cell-a" {
		t.Fatalf("directory back: %+v %v", p, err)
	}
}

func TestNegativeCache(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if _, _, err := b.lookup(t, wsNew); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown: %v", err)
	}
	if _, o, err := b.lookup(t, wsNew); !errors.Is(err, ErrNotFound) || o != NegativeHit {
		t.Fatalf("second lookup: %v %v, want negative hit", o, err)
	}
	b.src.set(wsNew, Placement{CellID: "cell-a", Epoch: 1})
	b.clock.Advance(6 * time.Second) // past NegativeTTL: the new workspace is found
	if p, _, err := b.lookup(t, wsNew); err != nil || p.CellID != "cell-a" {
		t.Fatalf("after NegativeTTL: %+v %v", p, err)
	}
	if n := b.src.calls.Load(); n != 2 {
		t.Errorf("source asked %d times, want 2", n)
	}
}

func TestRefreshBypassesCache(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.src.set(ws1, Placement{CellID: "cell-a", Epoch: 1})
	b.lookup(t, ws1)
	b.src.set(ws1, Placement{CellID: "cell-b", Epoch: 2})
	if p, err := b.cache.Refresh(context.Background(), ws1); err != nil || p.CellID != "cell-b" || p.Epoch != 2 {
		t.Fatalf("refresh = %+v %v", p, err)
	}
	if p, o, _ := b.lookup(t, ws1); o != Hit || p.CellID != "cell-b" {
		t.Errorf("after refresh: %+v %v, want the refreshed placement cached", p, o)
	}
	b.src.fail(errors.New("down"))
	if _, err := b.cache.Refresh(context.Background(), ws1); !errors.Is(err, ErrUnavailable) {
		t.Errorf("refresh with the directory down: %v", err)
	}
	// A refresh drops the entry it doubts, even when the directory cannot replace it.
	if _, _, err := b.lookup(t, ws1); !errors.Is(err, ErrUnavailable) {
		t.Errorf("lookup after a failed refresh: %v, want ErrUnavailable", err)
	}
}

func TestConcurrentMissesShareOneQuery(t *testing.T) {
	t.Parallel()
	b := setup(t) // outside the bubble: the LRUs' cleanup goroutines never exit
	b.src.set(ws1, Placement{CellID: "cell-a", Epoch: 1})
	synctest.Test(t, func(t *testing.T) {
		gate := make(chan struct{})
		b.src.mu.Lock()
		b.src.gate = gate
		b.src.mu.Unlock()
		var wg sync.WaitGroup
		for range 20 {
			wg.Go(func() {
				if p, _, err := b.cache.Lookup(context.Background(), ws1); err != nil || p.CellID != "cell-a" {
					t.Errorf("lookup = %+v %v", p, err)
				}
			})
		}
		synctest.Wait() // all 20 are blocked: one in the source, the rest waiting for it
		close(gate)
		wg.Wait()
	})
	if n := b.src.calls.Load(); n != 1 {
		t.Errorf("20 concurrent misses made %d source queries, want 1", n)
	}
}

func TestCancelledCallerDoesNotFailOthers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.src.set(ws1, Placement{CellID: "cell-a", Epoch: 1})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if p, _, err := b.cache.Lookup(ctx, ws1); err != nil || p.CellID != "cell-a" {
		t.Fatalf("lookup with a cancelled context = %+v %v; the shared query must not inherit it", p, err)
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	if err := (Config{TTL: time.Minute, MaxStale: time.Second}).Validate(); err == nil {
		t.Error("MaxStale < TTL accepted")
	}
	if err := (Config{}).Validate(); err != nil {
		t.Errorf("defaults rejected: %v", err)
	}
	if _, err := New(nil, Config{}); err == nil {
		t.Error("nil source accepted")
	}
}
