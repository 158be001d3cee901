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
	// Size is how many answers the cache holds at least (any Size keys fit; see ShardCapacity:
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

// shards is how many parts the default Store has.
const shards = 16

// ShardCapacity is the capacity of one of n parts of a store of size entries whose keys spread
// over the parts by hash. A part of exactly size/n overflows while the store as a whole has
// room: 100,000 keys in 16 shards of 6,250 left about 530 of them evicted, and those then
// missed on every request. Each part gets five standard deviations of headroom over its mean
// share (a part's count is binomial), so any size keys fit but with a vanishing probability;
// for 100,000 in 16 that is 6,646 per part, 6.3% more in all.
func ShardCapacity(size, n int) int {
	mean := float64(size) / float64(n)
	return int(math.Ceil(mean + 5*math.Sqrt(mean) + 1))
}

// negativeMinLRUTTL keeps the negative LRU's cleanup ticker (TTL/100) from waking up many times
// a second; NegativeTTL itself is enforced with the injected clock.
const negativeMinLRUTTL = time.Minute

// Entry is one cached answer as a Store keeps it.
type Entry[V any] struct {
	V V
	// Fetched is when the source last confirmed V (Unix nanoseconds of Config.Now); MaxStale
	// counts from it. Nanoseconds rather than time.Time: a cache of 100,000 answers is a
	// large share of the router's heap, and each time.Time is three words.
	Fetched int64
	// FreshUntil is when the next load is due (Unix nanoseconds).
	FreshUntil int64
	// Stale marks an entry kept alive by a failed refresh.
	Stale bool
}

// Store holds a Cache's answers (not its not-found entries). It must be safe for concurrent
// use, hold at least the Size it was made for, and evict about the least recently used
// entries beyond that. The default (New) is an LRU in shards; a caller whose keys and values
// have a fixed-size form can bring a table that keeps them out of the collector's way
// (router/placement).
type Store[V any] interface {
	// Get returns key's entry and counts it as used.
	Get(key string) (Entry[V], bool)
	// Peek returns key's entry without counting a use.
	Peek(key string) (Entry[V], bool)
	// Add stores or replaces key's entry, evicting another one when full. A store may decline
	// a key it cannot represent; the Cache then loads that key every time it is asked for.
	Add(key string, e Entry[V])
	Remove(key string)
	Len() int
}

// Cache caches values of type V by string key. It is safe for concurrent use.
type Cache[V any] struct {
	cfg Config
	pos Store[V]
	neg *expirable.LRU[string, time.Time] // key → end of its negative entry
	sf  singleflight.Group
}

// New returns an empty Cache with the default Store, or an error for a configuration Validate
// rejects.
func New[V any](cfg Config) (*Cache[V], error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s, err := newLRUStore[V](cfg.withDefaults().Size)
	if err != nil {
		return nil, err
	}
	return NewWithStore(cfg, s)
}

// NewWithStore returns an empty Cache that keeps its answers in s (made for cfg's Size).
func NewWithStore[V any](cfg Config, s Store[V]) (*Cache[V], error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if s == nil {
		return nil, errors.New("nil Store")
	}
	cfg = cfg.withDefaults()
	c := &Cache[V]{cfg: cfg, pos: s}
	c.neg = expirable.NewLRU[string, time.Time](cfg.NegativeSize, nil, max(cfg.NegativeTTL, negativeMinLRUTTL))
	return c, nil
}

// lruStore is the default Store: LRUs in shards, each under its own mutex, so that concurrent
// requests for different keys rarely meet on one lock; the LRU order is per shard, which is
// close enough for eviction. Answers past MaxStale are dropped when met (Get) or pushed out by
// newer ones; the cache's Size bounds them either way.
type lruStore[V any] struct {
	seed maphash.Seed
	s    [shards]shardLRU[V]
}

type shardLRU[V any] struct {
	mu sync.Mutex
	l  *simplelru.LRU[string, Entry[V]]
}

func newLRUStore[V any](size int) (*lruStore[V], error) {
	st := &lruStore[V]{seed: maphash.MakeSeed()}
	per := ShardCapacity(size, shards)
	for i := range st.s {
		l, err := simplelru.NewLRU[string, Entry[V]](per, nil)
		if err != nil {
			return nil, err
		}
		st.s[i].l = l
	}
	return st, nil
}

func (st *lruStore[V]) shard(key string) *shardLRU[V] {
	return &st.s[maphash.String(st.seed, key)%shards]
}

func (st *lruStore[V]) Get(k string) (Entry[V], bool) {
	s := st.shard(k)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.l.Get(k)
}

func (st *lruStore[V]) Peek(k string) (Entry[V], bool) {
	s := st.shard(k)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.l.Peek(k)
}

func (st *lruStore[V]) Add(k string, e Entry[V]) {
	s := st.shard(k)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.l.Add(k, e)
}

func (st *lruStore[V]) Remove(k string) {
	s := st.shard(k)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.l.Remove(k)
}

func (st *lruStore[V]) Len() int {
	n := 0
	for i := range st.s {
		s := &st.s[i]
		s.mu.Lock()
		n += s.l.Len()
		s.mu.Unlock()
	}
	return n
}

// Get returns the value of key, loading it with load when nothing fresh is cached. The error is
// ErrNotFound for a key the source does not know, or wraps ErrUnavailable (and the load error)
// when loading failed and nothing usable was cached. Concurrent loads of one key share one
// call of load.
func (c *Cache[V]) Get(ctx context.Context, key string, load Load[V]) (V, Outcome, error) {
	now := c.cfg.Now()
	nowN := now.UnixNano()
	if e, ok := c.pos.Get(key); ok {
		if nowN < e.FreshUntil {
			if e.Stale {
				return e.V, StaleServed, nil
			}
			return e.V, Hit, nil
		}
		if nowN-e.Fetched < int64(c.cfg.MaxStale) {
			if c.cfg.Revalidate && !e.Stale {
				// One background load per key (joining any under way); its channel is buffered,
				// so nobody needs to read it.
				c.sf.DoChan(key, c.loader(ctx, key, load))
				return e.V, Revalidating, nil
			}
			v, err := c.load(ctx, key, key, load)
			switch {
			case err == nil:
				return v, Refreshed, nil
			case errors.Is(err, ErrNotFound):
				return v, Refreshed, ErrNotFound
			}
			return e.V, StaleServed, nil
		}
		// Too old to trust even while the source is down.
		c.pos.Remove(key)
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
	c.pos.Remove(key)
	c.neg.Remove(key)
}

// Len is the number of cached values (not counting not-found entries).
func (c *Cache[V]) Len() int { return c.pos.Len() }

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
		switch {
		case err == nil:
			c.neg.Remove(key)
			c.pos.Add(key, Entry[V]{V: v, Fetched: nowN, FreshUntil: nowN + int64(c.cfg.TTL)})
			return v, nil
		case c.cfg.NotFound(err):
			c.pos.Remove(key)
			c.neg.Add(key, now.Add(c.cfg.NegativeTTL))
			return nil, ErrNotFound
		}
		if e, ok := c.pos.Peek(key); ok && nowN-e.Fetched < int64(c.cfg.MaxStale) {
			e.FreshUntil = min(nowN+int64(c.cfg.StaleRetry), e.Fetched+int64(c.cfg.MaxStale))
			e.Stale = true
			c.pos.Add(key, e)
		}
		return nil, err
	}
}
