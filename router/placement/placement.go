package placement

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"time"

	"github.com/hashicorp/golang-lru/v2/expirable"
	"golang.org/x/sync/singleflight"
)

// Placement says which cell hosts a workspace and at which epoch. The epoch is sent to the cell
// with every request; a cell that hosts the workspace at another epoch answers 421.
type Placement struct {
	CellID string
	Epoch  int64
}

// ErrNotFound is what a Source returns, and what Lookup returns, for a workspace the directory
// does not know.
var ErrNotFound = errors.New("placement: workspace not placed")

// ErrUnavailable wraps a Source failure that no cached placement could cover.
var ErrUnavailable = errors.New("placement: directory unavailable")

// Source is the authority on placements: the directory database in production, a map in tests
// and benchmarks. It returns ErrNotFound (possibly wrapped) for an unknown workspace; any other
// error means "could not find out".
type Source interface {
	Placement(ctx context.Context, workspaceID string) (Placement, error)
}

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
	// TTL is how long a placement is used without asking the Source again.
	TTL time.Duration
	// MaxStale is how long, counted from the last successful Source answer, a placement keeps
	// being used while the Source fails. It must not be shorter than TTL. It bounds how long a
	// directory outage is invisible to clients.
	MaxStale time.Duration
	// NegativeTTL is how long "the directory does not know this workspace" is remembered. Keep
	// it short: a workspace created just now is unreachable through this router for up to
	// NegativeTTL if someone asked for it a moment before it existed.
	NegativeTTL time.Duration
	// StaleRetry is how long a stale placement is used without another Source attempt after a
	// failed refresh.
	StaleRetry time.Duration
	// LookupTimeout bounds one Source query.
	LookupTimeout time.Duration
	// Size and NegativeSize cap the number of entries of each kind.
	Size, NegativeSize int
	// Now is the clock that decides freshness; nil is time.Now. The underlying LRUs also expire
	// entries by wall time after MaxStale (NegativeTTL), which only frees memory.
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
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Validate reports a configuration that cannot work.
func (c Config) Validate() error {
	c = c.withDefaults()
	if c.MaxStale < c.TTL {
		return fmt.Errorf("placement: MaxStale (%v) is shorter than TTL (%v)", c.MaxStale, c.TTL)
	}
	return nil
}

// Outcome says how Lookup found its answer; the router counts them.
type Outcome uint8

// Lookup outcomes.
const (
	Hit         Outcome = iota // fresh entry, no Source query
	Miss                       // nothing cached; the Source answered (or failed)
	Refreshed                  // stale entry; the Source answered
	StaleServed                // stale entry; the Source failed and the entry was used
	NegativeHit                // cached "not found"
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
	}
	return "unknown"
}

// shards splits the positive LRU so that concurrent requests for different workspaces rarely
// meet on one mutex; the LRU order is per shard, which is close enough for eviction.
const shards = 16

// negativeMinLRUTTL keeps the negative LRU's cleanup ticker (TTL/100) from waking up many times
// a second; NegativeTTL itself is enforced with the injected clock.
const negativeMinLRUTTL = time.Minute

type entry struct {
	p Placement
	// fetched is when the Source last confirmed p; MaxStale counts from it.
	fetched time.Time
	// freshUntil is when the next Source query is due.
	freshUntil time.Time
	// stale marks an entry kept alive by a failed refresh.
	stale bool
}

// Cache is a placement cache in front of a Source. It is safe for concurrent use.
type Cache struct {
	src  Source
	cfg  Config
	seed maphash.Seed
	pos  [shards]*expirable.LRU[string, entry]
	neg  *expirable.LRU[string, time.Time] // workspace → negative entry expiry
	sf   singleflight.Group
}

// New returns a Cache over src.
func New(src Source, cfg Config) (*Cache, error) {
	if src == nil {
		return nil, errors.New("placement: nil Source")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	c := &Cache{src: src, cfg: cfg, seed: maphash.MakeSeed()}
	per := max(1, cfg.Size/shards)
	for i := range c.pos {
		c.pos[i] = expirable.NewLRU[string, entry](per, nil, cfg.MaxStale)
	}
	c.neg = expirable.NewLRU[string, time.Time](cfg.NegativeSize, nil, max(cfg.NegativeTTL, negativeMinLRUTTL))
	return c, nil
}

func (c *Cache) shard(ws string) *expirable.LRU[string, entry] {
	return c.pos[maphash.String(c.seed, ws)%shards]
}

// Lookup returns the placement of a workspace. The error is ErrNotFound for a workspace the
// Source does not know, or wraps ErrUnavailable when the Source failed and nothing usable was
// cached.
func (c *Cache) Lookup(ctx context.Context, ws string) (Placement, Outcome, error) {
	now := c.cfg.Now()
	lru := c.shard(ws)
	if e, ok := lru.Get(ws); ok {
		if now.Before(e.freshUntil) {
			if e.stale {
				return e.p, StaleServed, nil
			}
			return e.p, Hit, nil
		}
		if now.Sub(e.fetched) < c.cfg.MaxStale {
			p, err := c.query(ctx, ws, ws)
			switch {
			case err == nil:
				return p, Refreshed, nil
			case errors.Is(err, ErrNotFound):
				return Placement{}, Refreshed, ErrNotFound
			}
			return e.p, StaleServed, nil
		}
		// Too old to trust even while the directory is down.
		lru.Remove(ws)
	}
	if until, ok := c.neg.Get(ws); ok {
		if now.Before(until) {
			return Placement{}, NegativeHit, ErrNotFound
		}
		c.neg.Remove(ws)
	}
	p, err := c.query(ctx, ws, ws)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return Placement{}, Miss, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	return p, Miss, err
}

// Refresh drops what is cached for a workspace and asks the Source again; the router calls it
// when a cell answered 421. Concurrent refreshes of one workspace share one query, but never
// join a plain lookup that may have started before the cell said the placement was wrong.
func (c *Cache) Refresh(ctx context.Context, ws string) (Placement, error) {
	c.Invalidate(ws)
	p, err := c.query(ctx, ws, "refresh\x00"+ws)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return Placement{}, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	return p, err
}

// Invalidate forgets a workspace's cached placement (positive or negative).
func (c *Cache) Invalidate(ws string) {
	c.shard(ws).Remove(ws)
	c.neg.Remove(ws)
}

// Len is the number of cached placements (not counting negative entries).
func (c *Cache) Len() int {
	n := 0
	for _, l := range c.pos {
		n += l.Len()
	}
	return n
}

// query asks the Source once per flight key and stores the answer. On a Source failure it
// pushes the freshness of a still-usable stale entry out by StaleRetry, so the next requests
// use it without waiting on the directory again.
func (c *Cache) query(ctx context.Context, ws, key string) (Placement, error) {
	v, err, _ := c.sf.Do(key, func() (any, error) {
		qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.LookupTimeout)
		defer cancel()
		p, err := c.src.Placement(qctx, ws)
		now := c.cfg.Now()
		lru := c.shard(ws)
		switch {
		case err == nil:
			c.neg.Remove(ws)
			lru.Add(ws, entry{p: p, fetched: now, freshUntil: now.Add(c.cfg.TTL)})
			return p, nil
		case errors.Is(err, ErrNotFound):
			lru.Remove(ws)
			c.neg.Add(ws, now.Add(c.cfg.NegativeTTL))
			return Placement{}, ErrNotFound
		}
		if e, ok := lru.Peek(ws); ok && now.Sub(e.fetched) < c.cfg.MaxStale {
			e.freshUntil = minTime(now.Add(c.cfg.StaleRetry), e.fetched.Add(c.cfg.MaxStale))
			e.stale = true
			lru.Add(ws, e)
		}
		return Placement{}, err
	})
	if err != nil {
		return Placement{}, err
	}
	return v.(Placement), nil
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
