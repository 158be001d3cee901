package placement

import (
	"context"
	"errors"
	"fmt"
	"time"

	"slidecells/shared/stalecache"
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
	DefaultTTL           = stalecache.DefaultTTL
	DefaultMaxStale      = stalecache.DefaultMaxStale
	DefaultNegativeTTL   = stalecache.DefaultNegativeTTL
	DefaultStaleRetry    = stalecache.DefaultStaleRetry
	DefaultLookupTimeout = stalecache.DefaultLookupTimeout
	DefaultSize          = stalecache.DefaultSize
	DefaultNegativeSize  = stalecache.DefaultNegativeSize
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
	// Revalidate serves a placement past TTL (within MaxStale) at once and reads it again in the
	// background, so a workspace used at least once per MaxStale never waits for the
	// directory. Safe for placements: a cell answers 421 to a wrong one and the router then
	// refreshes before retrying.
	Revalidate bool
	// Size and NegativeSize cap the number of entries of each kind.
	Size, NegativeSize int
	// Now is the clock that decides freshness; nil is time.Now. The underlying LRUs also expire
	// entries by wall time after MaxStale (NegativeTTL), which only frees memory.
	Now func() time.Time
}

func (c Config) cache() stalecache.Config {
	return stalecache.Config{
		TTL: c.TTL, MaxStale: c.MaxStale, NegativeTTL: c.NegativeTTL, StaleRetry: c.StaleRetry,
		LookupTimeout: c.LookupTimeout, Size: c.Size, NegativeSize: c.NegativeSize, Now: c.Now, Revalidate: c.Revalidate,
		NotFound: func(err error) bool { return errors.Is(err, ErrNotFound) },
	}
}

// Validate reports a configuration that cannot work.
func (c Config) Validate() error {
	if err := c.cache().Validate(); err != nil {
		return fmt.Errorf("placement: %w", err)
	}
	return nil
}

// Outcome says how Lookup found its answer; the router counts them.
type Outcome = stalecache.Outcome

// Lookup outcomes.
const (
	Hit         = stalecache.Hit         // fresh entry, no Source query
	Miss        = stalecache.Miss        // nothing cached; the Source answered (or failed)
	Refreshed   = stalecache.Refreshed   // stale entry; the Source answered
	StaleServed = stalecache.StaleServed // stale entry; the Source failed and the entry was used
	NegativeHit = stalecache.NegativeHit // cached "not found"
	// Revalidating: an entry past TTL served at once while a background read renews it.
	Revalidating = stalecache.Revalidating
)

// Cache is a placement cache in front of a Source (a stalecache.Cache whose answers live in a
// table off the Go heap, see table.go). It is safe for concurrent use. Keys are workspace IDs;
// only canonical ones (ids.Bytes) are cached, any other key is asked of the Source each time.
type Cache struct {
	c    *stalecache.Cache[Placement]
	load stalecache.Load[Placement] // the Source's method, bound once: no allocation per lookup
}

// New returns a Cache over src.
func New(src Source, cfg Config) (*Cache, error) {
	if src == nil {
		return nil, errors.New("placement: nil Source")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	size := cfg.Size
	if size <= 0 {
		size = DefaultSize
	}
	c, err := stalecache.NewWithStore[Placement](cfg.cache(), newTable(size))
	if err != nil {
		return nil, fmt.Errorf("placement: %w", err)
	}
	return &Cache{c: c, load: src.Placement}, nil
}

// Lookup returns the placement of a workspace. The error is ErrNotFound for a workspace the
// Source does not know, or wraps ErrUnavailable when the Source failed and nothing usable was
// cached.
func (c *Cache) Lookup(ctx context.Context, ws string) (Placement, Outcome, error) {
	p, o, err := c.c.Get(ctx, ws, c.load)
	if err != nil {
		err = mapError(err)
	}
	return p, o, err
}

// Refresh drops what is cached for a workspace and asks the Source again; the router calls it
// when a cell answered 421. Concurrent refreshes of one workspace share one query, but never
// join a plain lookup that may have started before the cell said the placement was wrong.
func (c *Cache) Refresh(ctx context.Context, ws string) (Placement, error) {
	p, err := c.c.Refresh(ctx, ws, c.load)
	if err != nil {
		err = mapError(err)
	}
	return p, err
}

// Invalidate forgets a workspace's cached placement (positive or negative).
func (c *Cache) Invalidate(ws string) { c.c.Invalidate(ws) }

// Len is the number of cached placements (not counting negative entries).
func (c *Cache) Len() int { return c.c.Len() }

// mapError turns the cache's errors into this package's.
func mapError(err error) error {
	switch {
	case errors.Is(err, stalecache.ErrNotFound):
		return ErrNotFound
	case errors.Is(err, stalecache.ErrUnavailable):
		return fmt.Errorf("%w: %v", ErrUnavailable, errors.Unwrap(err))
	}
	return err
}
