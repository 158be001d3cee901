package stalecache

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

var errGone = errors.New("gone")

// source is a fake origin: a map, an error switch and a call counter.
type source struct {
	mu    sync.Mutex
	m     map[string]string
	err   error
	calls atomic.Int32
}

func (s *source) load(_ context.Context, k string) (string, error) {
	s.calls.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return "", s.err
	}
	v, ok := s.m[k]
	if !ok {
		return "", errGone
	}
	return v, nil
}

func (s *source) set(k, v string) { s.mu.Lock(); s.m[k] = v; s.mu.Unlock() }
func (s *source) fail(err error)  { s.mu.Lock(); s.err = err; s.mu.Unlock() }

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time          { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Advance(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

type bundle struct {
	src   *source
	clock *clock
	cache *Cache[string]
}

func setup(t *testing.T) *bundle {
	t.Helper()
	b := &bundle{src: &source{m: map[string]string{}}, clock: &clock{t: time.Unix(1_900_000_000, 0)}}
	c, err := New[string](Config{TTL: 10 * time.Second, MaxStale: time.Minute, NegativeTTL: 2 * time.Second,
		StaleRetry: time.Second, Now: b.clock.Now, NotFound: func(err error) bool { return errors.Is(err, errGone) }})
	if err != nil {
		t.Fatal(err)
	}
	b.cache = c
	return b
}

func (b *bundle) get(k string) (string, Outcome, error) {
	return b.cache.Get(context.Background(), k, b.src.load)
}

func TestOutcomes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.src.set("k", "v1")
	steps := []struct {
		name    string
		advance time.Duration
		before  func()
		want    string
		outcome Outcome
		err     error
	}{
		{"miss", 0, nil, "v1", Miss, nil},
		{"hit within TTL", 9 * time.Second, nil, "v1", Hit, nil},
		{"refreshed after TTL", 2 * time.Second, func() { b.src.set("k", "v2") }, "v2", Refreshed, nil},
		{"stale served when the source fails", 11 * time.Second, func() { b.src.fail(errors.New("down")) }, "v2", StaleServed, nil},
		{"stale served without asking within StaleRetry", 500 * time.Millisecond, nil, "v2", StaleServed, nil},
		{"past MaxStale: unavailable", time.Minute, nil, "", Miss, ErrUnavailable},
		{"source back", 0, func() { b.src.fail(nil) }, "v2", Miss, nil},
	}
	for _, s := range steps {
		b.clock.Advance(s.advance)
		if s.before != nil {
			s.before()
		}
		v, o, err := b.get("k")
		if v != s.want || o != s.outcome || !errors.Is(err, s.err) || (s.err == nil) != (err == nil) {
			t.Fatalf("%s: %q %v %v; want %q %v %v", s.name, v, o, err, s.want, s.outcome, s.err)
		}
	}
}

func TestStaleRetryThrottlesTheSource(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.src.set("k", "v")
	b.get("k")
	b.src.fail(errors.New("down"))
	b.clock.Advance(11 * time.Second)
	for range 10 {
		if v, o, err := b.get("k"); v != "v" || o != StaleServed || err != nil {
			t.Fatalf("stale get = %q %v %v", v, o, err)
		}
	}
	if n := b.src.calls.Load(); n != 2 {
		t.Errorf("10 gets while the source is down asked it %d times in all, want 2 (one load, one failed refresh)", n)
	}
	b.clock.Advance(time.Second)
	b.get("k")
	if n := b.src.calls.Load(); n != 3 {
		t.Errorf("after StaleRetry: %d calls, want 3", n)
	}
}

func TestNegativeEntries(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if _, o, err := b.get("new"); !errors.Is(err, ErrNotFound) || o != Miss {
		t.Fatalf("unknown: %v %v", o, err)
	}
	if _, o, err := b.get("new"); !errors.Is(err, ErrNotFound) || o != NegativeHit {
		t.Fatalf("again: %v %v, want a negative hit", o, err)
	}
	// Past NegativeTTL a not-found answer is not used stale: the failure is reported.
	b.clock.Advance(3 * time.Second)
	b.src.fail(errors.New("down"))
	if _, _, err := b.get("new"); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("expired negative, source down: %v, want ErrUnavailable", err)
	}
	b.src.fail(nil)
	b.src.set("new", "here")
	if v, _, err := b.get("new"); v != "here" || err != nil {
		t.Fatalf("created since: %q %v", v, err)
	}
	if n := b.src.calls.Load(); n != 3 {
		t.Errorf("%d source calls, want 3", n)
	}
}

func TestUnavailableCarriesTheCause(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.src.fail(context.DeadlineExceeded)
	_, _, err := b.get("k")
	if !errors.Is(err, ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) || errors.Unwrap(err) != context.DeadlineExceeded {
		t.Fatalf("err = %v; want ErrUnavailable wrapping the load's error", err)
	}
}

func TestWithoutNotFoundEveryErrorIsAFailure(t *testing.T) {
	t.Parallel()
	c, err := New[string](Config{})
	if err != nil {
		t.Fatal(err)
	}
	load := func(context.Context, string) (string, error) { return "", errGone }
	if _, _, err := c.Get(context.Background(), "k", load); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
}

func TestRefreshReplacesAndFailedRefreshForgets(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.src.set("k", "old")
	b.get("k")
	b.src.set("k", "new")
	if v, err := b.cache.Refresh(context.Background(), "k", b.src.load); v != "new" || err != nil {
		t.Fatalf("refresh = %q %v", v, err)
	}
	if v, o, _ := b.get("k"); v != "new" || o != Hit {
		t.Fatalf("after refresh: %q %v", v, o)
	}
	b.src.fail(errors.New("down"))
	if _, err := b.cache.Refresh(context.Background(), "k", b.src.load); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("refresh, source down: %v", err)
	}
	if _, _, err := b.get("k"); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("after a failed refresh: %v, want nothing cached", err)
	}
}

func TestCancelledCallerDoesNotFailTheLoad(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.src.set("k", "v")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	load := func(ctx context.Context, k string) (string, error) {
		if err := ctx.Err(); err != nil {
			return "", err
		}
		return b.src.load(ctx, k)
	}
	if v, _, err := b.cache.Get(ctx, "k", load); v != "v" || err != nil {
		t.Fatalf("get with a cancelled context = %q %v", v, err)
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	if _, err := New[int](Config{TTL: time.Minute, MaxStale: time.Second}); err == nil {
		t.Error("MaxStale < TTL accepted")
	}
	if err := (Config{}).Validate(); err != nil {
		t.Errorf("defaults rejected: %v", err)
	}
}

// TestSizeKeysFit: a cache of Size holds any Size keys, although its shards fill unevenly
// (16 shards of exactly Size/16 held only about 99,470 of 100,000).
func TestSizeKeysFit(t *testing.T) {
	const n = 100_000
	c, err := New[int](Config{Size: n})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	load := func(_ context.Context, key string) (int, error) { return len(key), nil }
	for i := range n {
		if _, o, err := c.Get(ctx, "ws_"+strconv.Itoa(i), load); err != nil || o != Miss {
			t.Fatalf("first lookup of %d: %v %v", i, o, err)
		}
	}
	if c.Len() != n {
		t.Fatalf("%d of %d keys cached", c.Len(), n)
	}
	for i := range n {
		if _, o, _ := c.Get(ctx, "ws_"+strconv.Itoa(i), load); o != Hit {
			t.Fatalf("second lookup of %d: %v, want a hit", i, o)
		}
	}
	if got, max := ShardCapacity(n, shards)*shards, n*107/100; got > max {
		t.Errorf("capacity %d for Size %d: more than 7%% headroom", got, n)
	}
}

// settle waits until the source was called n times in all (a background load finished its
// call; the answer is stored before the flight ends, which waitFlight covers).
func (b *bundle) settle(t *testing.T, n int32, key string) {
	t.Helper()
	for i := 0; b.src.calls.Load() < n; i++ {
		if i > 5000 {
			t.Fatalf("the source was called %d times, want %d", b.src.calls.Load(), n)
		}
		time.Sleep(time.Millisecond)
	}
	// The flight ends after the answer is stored: joining it waits for that.
	<-b.cache.sf.DoChan(key, func() (any, error) { return nil, nil })
}

func TestRevalidateServesAtOnceAndRenewsInTheBackground(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.cache.cfg.Revalidate = true
	b.src.set("k", "v1")
	if _, o, _ := b.get("k"); o != Miss {
		t.Fatalf("first get: %v", o)
	}
	b.src.set("k", "v2")
	b.clock.Advance(11 * time.Second) // past TTL, within MaxStale
	if v, o, err := b.get("k"); v != "v1" || o != Revalidating || err != nil {
		t.Fatalf("past TTL: %q %v %v, want the cached v1 at once, revalidating", v, o, err)
	}
	b.settle(t, 2, "k")
	if v, o, err := b.get("k"); v != "v2" || o != Hit || err != nil {
		t.Fatalf("after the background load: %q %v %v, want v2 fresh", v, o, err)
	}
	if n := b.src.calls.Load(); n != 2 {
		t.Errorf("%d source calls, want 2", n)
	}
	// Past MaxStale nothing is served without the source, revalidation or not.
	b.clock.Advance(2 * time.Minute)
	b.src.set("k", "v3")
	if v, o, err := b.get("k"); v != "v3" || o != Miss || err != nil {
		t.Fatalf("past MaxStale: %q %v %v, want a synchronous miss", v, o, err)
	}
}

func TestRevalidateFailureFallsBackToStaleIfError(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.cache.cfg.Revalidate = true
	b.src.set("k", "v1")
	b.get("k")
	b.src.fail(errors.New("down"))
	b.clock.Advance(11 * time.Second)
	if v, o, _ := b.get("k"); v != "v1" || o != Revalidating {
		t.Fatalf("past TTL: %q %v", v, o)
	}
	b.settle(t, 2, "k")
	// The failed background load marked the entry stale: served within StaleRetry without
	// asking, then asked on the caller's time, as without revalidation.
	if v, o, err := b.get("k"); v != "v1" || o != StaleServed || err != nil {
		t.Fatalf("after a failed background load: %q %v %v", v, o, err)
	}
	if n := b.src.calls.Load(); n != 2 {
		t.Errorf("%d source calls within StaleRetry, want 2", n)
	}
	b.clock.Advance(time.Minute)
	if _, o, err := b.get("k"); o != Miss || !errors.Is(err, ErrUnavailable) {
		t.Fatalf("past MaxStale with the source down: %v %v, want unavailable", o, err)
	}
}

func TestRevalidateOfAKeyTheSourceForgot(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.cache.cfg.Revalidate = true
	b.src.set("k", "v1")
	b.get("k")
	b.src.mu.Lock()
	delete(b.src.m, "k")
	b.src.mu.Unlock()
	b.clock.Advance(11 * time.Second)
	if v, o, _ := b.get("k"); v != "v1" || o != Revalidating {
		t.Fatalf("past TTL: %q %v", v, o)
	}
	b.settle(t, 2, "k")
	if _, o, err := b.get("k"); o != NegativeHit || !errors.Is(err, ErrNotFound) {
		t.Fatalf("after the source forgot the key: %v %v, want a negative hit", o, err)
	}
}
