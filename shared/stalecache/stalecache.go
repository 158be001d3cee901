// Package stalecache is the in-memory cache in front of the directory, for the router's
// placements and for the cell's directory answers (tokens, memberships, placements): answers
// are used for a TTL, kept serving for a bounded time while the directory cannot be reached
// (stale-if-error), refreshed at most once per flight and at most once per StaleRetry while
// the directory fails, and "not found" is remembered for a short NegativeTTL. With Revalidate
// (the router's placements only) an answer past its TTL is used at once while it is loaded
// again in the background.
//
// It knows nothing about what it caches: values come from a load function given to each
// call, and "not found" is whatever error the NotFound function recognises. It must not grow
// policy of its own (who may see what); its callers decide that.
package stalecache

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"math"
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/expirable"
	"github.com/hashicorp/golang-lru/v2/simplelru"
	"golang.org/x/sync/singleflight"
)

// Defaults of Config.
const (
	DefaultTTL           = 30 * time.Second
	DefaultMaxStale      = 5 * time.Minute
	DefaultNegativeTTL   = 5 * time.Second
	DefaultStaleRetry    = time.Second
	DefaultLookupTimeout = 2 * time.Second
	DefaultSize          = 100_000
	DefaultNegativeSize  = 10_000
)

// Config tunes a Cache. Zero values take the defaults above.
type Config struct {
	// TTL is how long an answer is used without loading it again.
	TTL time.Duration
	// MaxStale is how long, counted from the last successful load, an answer keeps being used
	// while loading fails. It must not be shorter than TTL; it bounds how long an outage of
	// the source is invisible.
	MaxStale time.Duration
	// NegativeTTL is how long "not found" is remembered. A not-found answer is never used
	// stale: past NegativeTTL the source is asked again, and its failure is reported.
	NegativeTTL time.Duration
	// StaleRetry throttles refreshes while the source fails: after a failed refresh the stale
	// answer is used for StaleRetry without asking again, so a dead source costs one query
	// (and one LookupTimeout) per key per StaleRetry instead of one per request.
	StaleRetry time.Duration
	// LookupTimeout bounds one load. The load runs on a context detached from the caller's
	// (a caller that goes away does not fail the others sharing the flight).
	LookupTimeout time.Duration
	// Size is how many answers the cache holds at least (any Size keys fit; see shardCapacity:
	// up to about 6% more may be kept) and NegativeSize caps the not-found answers, which have
	// their own, smaller LRU so that a flood of unknown keys cannot evict the known ones.
	Size, NegativeSize int
	// NotFound recognises the load error that means "the source does not know this key". Nil
	// means every error is a failure.
	NotFound func(error) bool
	// Revalidate serves an answer past its TTL (but within MaxStale, and not marked stale by a
	// failed load) at once and loads it again in the background (stale-while-revalidate), so
	// that a key used at least once per MaxStale never makes its caller wait for the source.
	// Only for answers whose staleness the caller can detect and correct by itself (the
	// router's placements: a cell answers 421 to a wrong one); never for answers that must stop
	// working within TTL (revoked tokens). A failed background load falls back to the
	// synchronous behaviour: the entry is marked stale and served for StaleRetry, then loaded
	// on the caller's time.
	Revalidate bool
	// Now is the clock that decides freshness; nil is time.Now. Answers past MaxStale are
	// dropped when met or pushed out by newer ones (Size bounds them); the negative LRU also
	// expires its entries by wall time after max(NegativeTTL, a minute), which only frees memory.
	Now func() time.Time
}

func (c Config) withDefaults() Config {
	if c.TTL <= 0 {
		c.TTL = DefaultTTL
	}
	if c.MaxStale <= 0 {
		c.MaxStale = max(DefaultMaxStale, c.TTL)
	}
	if c.NegativeTTL <= 0 {
		c.NegativeTTL = DefaultNegativeTTL
	}
	if c.StaleRetry <= 0 {
		c.StaleRetry = DefaultStaleRetry
	}
	if c.LookupTimeout <= 0 {
		c.LookupTimeout = DefaultLookupTimeout
	}
	if c.Size <= 0 {
		c.Size = DefaultSize
	}
	if c.NegativeSize <= 0 {
		c.NegativeSize = DefaultNegativeSize
	}
	if c.NotFound == nil {
		c.NotFound = func(error) bool { return false }
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Validate reports a configuration that cannot work.
func (c Config) Validate() error {
	c = c.withDefaults()
	if c.MaxStale < c.TTL {
		return fmt.Errorf("MaxStale (%v) is shorter than TTL (%v)", c.MaxStale, c.TTL)
	}
	return nil
}

// Outcome says how Get found its answer (for metrics).
type Outcome uint8

// Get outcomes.
const (
	Hit          Outcome = iota // fresh entry, no load
	Miss                        // nothing cached; loaded (or failed)
	Refreshed                   // stale entry; loaded again
	StaleServed                 // stale entry used because loading failed (or was throttled)
	NegativeHit                 // cached "not found"
	Revalidating                // entry past its TTL served at once; a background load renews it (Config.Revalidate)
)

func (o Outcome) String() string {
	switch o {
	case Hit:
		return "hit"
	case Miss:
		return "miss"
	case Refreshed:
		return "refreshed"
	case StaleServed:
		return "stale_served"
	case NegativeHit:
		return "negative_hit"
	case Revalidating:
		return "revalidating"
	}
	return "unknown"
}

// ErrNotFound is returned for a key the source does not know (a cached or a fresh answer).
var ErrNotFound = errors.New("stalecache: not found")

// ErrUnavailable is what a load failure that no cached answer could cover matches
// (errors.Is); errors.Unwrap of such an error gives the load's own error.
var ErrUnavailable = errors.New("stalecache: source unavailable")

type unavailableError struct{ err error }

func (u unavailableError) Error() string        { return ErrUnavailable.Error() + ": " + u.err.Error() }
func (u unavailableError) Is(target error) bool { return target == ErrUnavailable }
func (u unavailableError) Unwrap() error        { return u.err }

// Load fetches the value of key from the source. ctx carries LookupTimeout.
type Load[V any] func(ctx context.Context, key string) (V, error)

// shards splits the positive LRU so that concurrent requests for different keys rarely meet on
// one mutex; the LRU order is per shard, which is close enough for eviction.
const shards = 16

// shardCapacity is the capacity of one shard of a cache of size entries. Keys spread over the
// shards by hash, so a shard of exactly size/shards overflows while the cache as a whole has
// room: 100,000 keys in 16 shards of 6,250 left about 530 of them evicted, and those then
// missed on every request. Each shard gets five standard deviations of headroom over its mean
// share (a shard's count is binomial), so any size keys fit but with a vanishing probability;
// for 100,000 that is 6,646 per shard, 6.3% more in all.
func shardCapacity(size int) int {
	mean := float64(size) / shards
	return int(math.Ceil(mean + 5*math.Sqrt(mean) + 1))
}

// negativeMinLRUTTL keeps the negative LRU's cleanup ticker (TTL/100) from waking up many times
// a second; NegativeTTL itself is enforced with the injected clock.
const negativeMinLRUTTL = time.Minute

type entry[V any] struct {
	v V
	// fetched is when the source last confirmed v (Unix nanoseconds of Config.Now); MaxStale
	// counts from it. Nanoseconds rather than time.Time: a cache of 100,000 answers is a
	// large share of the router's heap, and each time.Time is three words.
	fetched int64
	// freshUntil is when the next load is due (Unix nanoseconds).
	freshUntil int64
	// stale marks an entry kept alive by a failed refresh.
	stale bool
}

// Cache caches values of type V by string key. It is safe for concurrent use.
type Cache[V any] struct {
	cfg  Config
	seed maphash.Seed
	pos  [shards]*shardLRU[V]
	neg  *expirable.LRU[string, time.Time] // key → end of its negative entry
	sf   singleflight.Group
}

// New returns an empty Cache, or an error for a configuration Validate rejects.
func New[V any](cfg Config) (*Cache[V], error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	c := &Cache[V]{cfg: cfg, seed: maphash.MakeSeed()}
	per := shardCapacity(cfg.Size)
	for i := range c.pos {
		l, err := simplelru.NewLRU[string, entry[V]](per, nil)
		if err != nil {
			return nil, err
		}
		c.pos[i] = &shardLRU[V]{l: l}
	}
	c.neg = expirable.NewLRU[string, time.Time](cfg.NegativeSize, nil, max(cfg.NegativeTTL, negativeMinLRUTTL))
	return c, nil
}

// shardLRU is one shard of answers: an LRU under its own mutex. Answers past MaxStale are
// dropped when met (Get) or pushed out by newer ones; the cache's Size bounds them either way.
type shardLRU[V any] struct {
	mu sync.Mutex
	l  *simplelru.LRU[string, entry[V]]
}

func (s *shardLRU[V]) Get(k string) (entry[V], bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.l.Get(k)
}

func (s *shardLRU[V]) Peek(k string) (entry[V], bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.l.Peek(k)
}

func (s *shardLRU[V]) Add(k string, e entry[V]) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.l.Add(k, e)
}

func (s *shardLRU[V]) Remove(k string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.l.Remove(k)
}

func (s *shardLRU[V]) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.l.Len()
}

func (c *Cache[V]) shard(key string) *shardLRU[V] {
	return c.pos[maphash.String(c.seed, key)%shards]
}

// Get returns the value of key, loading it with load when nothing fresh is cached. The error is
// ErrNotFound for a key the source does not know, or wraps ErrUnavailable (and the load error)
// when loading failed and nothing usable was cached. Concurrent loads of one key share one
// call of load.
func (c *Cache[V]) Get(ctx context.Context, key string, load Load[V]) (V, Outcome, error) {
	now := c.cfg.Now()
	nowN := now.UnixNano()
	lru := c.shard(key)
	if e, ok := lru.Get(key); ok {
		if nowN < e.freshUntil {
			if e.stale {
				return e.v, StaleServed, nil
			}
			return e.v, Hit, nil
		}
		if nowN-e.fetched < int64(c.cfg.MaxStale) {
			if c.cfg.Revalidate && !e.stale {
				// One background load per key (joining any under way); its channel is buffered,
				// so nobody needs to read it.
				c.sf.DoChan(key, c.loader(ctx, key, load))
				return e.v, Revalidating, nil
			}
			v, err := c.load(ctx, key, key, load)
			switch {
			case err == nil:
				return v, Refreshed, nil
			case errors.Is(err, ErrNotFound):
				return v, Refreshed, ErrNotFound
			}
			return e.v, StaleServed, nil
		}
		// Too old to trust even while the source is down.
		lru.Remove(key)
	}
	if until, ok := c.neg.Get(key); ok {
		if now.Before(until) {
			var zero V
			return zero, NegativeHit, ErrNotFound
		}
		c.neg.Remove(key)
	}
	v, err := c.load(ctx, key, key, load)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return v, Miss, unavailableError{err}
	}
	return v, Miss, err
}

// Refresh drops what is cached for key and loads it again, for a caller that learned the
// cached answer is wrong (a cell's 421). Concurrent refreshes of one key share one load, but
// never join a plain Get's load that may have started before the answer was known wrong. The
// errors are Get's; a failed refresh leaves nothing cached for key.
func (c *Cache[V]) Refresh(ctx context.Context, key string, load Load[V]) (V, error) {
	c.Invalidate(key)
	v, err := c.load(ctx, key, "refresh\x00"+key, load)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return v, unavailableError{err}
	}
	return v, err
}

// Invalidate forgets key (positive or negative).
func (c *Cache[V]) Invalidate(key string) {
	c.shard(key).Remove(key)
	c.neg.Remove(key)
}

// Len is the number of cached values (not counting not-found entries).
func (c *Cache[V]) Len() int {
	n := 0
	for _, l := range c.pos {
		n += l.Len()
	}
	return n
}

// load calls load once per flight key and stores the answer. On a failure it pushes the
// freshness of a still-usable stale entry out by StaleRetry, so the next requests use it
// without waiting on the source again. It returns ErrNotFound itself for a not-found answer.
func (c *Cache[V]) load(ctx context.Context, key, flight string, load Load[V]) (V, error) {
	r, err, _ := c.sf.Do(flight, c.loader(ctx, key, load))
	if err != nil {
		var zero V
		return zero, err
	}
	return r.(V), nil
}

// loader is the body of a flight: one call of load, its answer stored.
func (c *Cache[V]) loader(ctx context.Context, key string, load Load[V]) func() (any, error) {
	return func() (any, error) {
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.LookupTimeout)
		defer cancel()
		v, err := load(lctx, key)
		now := c.cfg.Now()
		nowN := now.UnixNano()
		lru := c.shard(key)
		switch {
		case err == nil:
			c.neg.Remove(key)
			lru.Add(key, entry[V]{v: v, fetched: nowN, freshUntil: nowN + int64(c.cfg.TTL)})
			return v, nil
		case c.cfg.NotFound(err):
			lru.Remove(key)
			c.neg.Add(key, now.Add(c.cfg.NegativeTTL))
			return nil, ErrNotFound
		}
		if e, ok := lru.Peek(key); ok && nowN-e.fetched < int64(c.cfg.MaxStale) {
			e.freshUntil = min(nowN+int64(c.cfg.StaleRetry), e.fetched+int64(c.cfg.MaxStale))
			e.stale = true
			lru.Add(key, e)
		}
		return nil, err
	}
}
