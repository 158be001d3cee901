package directory

import (
	"context"
	"errors"
	"fmt"
	"time"

	"slidecells/shared/stalecache"
)

// CacheOptions bound how long cached directory answers are used.
type CacheOptions struct {
	// TTL is how long an answer is used without asking the directory again. Default 10s. A
	// revoked token or removed membership takes effect within TTL.
	TTL time.Duration
	// MaxStale is how long an answer keeps being used while the directory is unreachable.
	// Default 5m. After that, requests needing the entry fail with the directory error.
	MaxStale time.Duration
	// Size is the number of entries kept per kind. Default 100000.
	Size int
	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

func (o CacheOptions) withDefaults() CacheOptions {
	if o.TTL <= 0 {
		o.TTL = 10 * time.Second
	}
	if o.MaxStale < o.TTL {
		o.MaxStale = 5 * time.Minute
		if o.MaxStale < o.TTL {
			o.MaxStale = o.TTL
		}
	}
	if o.Size <= 0 {
		o.Size = 100000
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// Cached answers the lookups a cell makes on every request from memory (a stalecache.Cache per
// kind of answer), refreshing from the directory after TTL and serving the last answer for up
// to MaxStale while the directory is unreachable, asking it again at most once a second per
// entry meanwhile. Not-found answers are cached for TTL too, so unknown tokens do not hammer
// the directory; they are not served stale.
type Cached struct {
	Dir        *Directory
	tokens     *staleCache[string, Token]
	roles      *staleCache[string, string]
	placements *staleCache[string, Placement]
	lists      *staleCache[string, []MemberWorkspace]
	workspaces *staleCache[string, Workspace]
	limits     *staleCache[string, Limits]
	allLimits  *staleCache[string, []Limits]
}

// NewCached wraps d.
func NewCached(d *Directory, o CacheOptions) *Cached {
	o = o.withDefaults()
	return &Cached{
		Dir:        d,
		tokens:     newStaleCache[string, Token](o),
		roles:      newStaleCache[string, string](o),
		placements: newStaleCache[string, Placement](o),
		lists:      newStaleCache[string, []MemberWorkspace](o),
		workspaces: newStaleCache[string, Workspace](o),
		limits:     newStaleCache[string, Limits](o),
		allLimits:  newStaleCache[string, []Limits](o),
	}
}

// Token looks a token up by hash.
func (c *Cached) Token(ctx context.Context, hash []byte) (Token, error) {
	return c.tokens.get(ctx, string(hash), func(ctx context.Context) (Token, error) { return c.Dir.TokenByHash(ctx, hash) })
}

// Role returns a user's role in a workspace; ErrNotFound for non-members.
func (c *Cached) Role(ctx context.Context, workspaceID, userID string) (string, error) {
	return c.roles.get(ctx, workspaceID+"/"+userID, func(ctx context.Context) (string, error) {
		return c.Dir.Role(ctx, workspaceID, userID)
	})
}

// Placement returns a workspace's placement.
func (c *Cached) Placement(ctx context.Context, workspaceID string) (Placement, error) {
	return c.placements.get(ctx, workspaceID, c.placementLoad(workspaceID))
}

// FreshPlacement bypasses the cache (after a misdirect) and stores the answer. It never joins
// a lookup that started before the misdirect.
func (c *Cached) FreshPlacement(ctx context.Context, workspaceID string) (Placement, error) {
	return c.placements.refresh(ctx, workspaceID, c.placementLoad(workspaceID))
}

func (c *Cached) placementLoad(workspaceID string) func(context.Context) (Placement, error) {
	return func(ctx context.Context) (Placement, error) { return c.Dir.Placement(ctx, workspaceID) }
}

// WorkspacesOf lists a user's workspaces.
func (c *Cached) WorkspacesOf(ctx context.Context, userID string) ([]MemberWorkspace, error) {
	return c.lists.get(ctx, userID, func(ctx context.Context) ([]MemberWorkspace, error) { return c.Dir.WorkspacesOf(ctx, userID) })
}

// Workspace returns one workspace.
func (c *Cached) Workspace(ctx context.Context, id string) (Workspace, error) {
	return c.workspaces.get(ctx, id, func(ctx context.Context) (Workspace, error) { return c.Dir.Workspace(ctx, id) })
}

// Limits returns a workspace's limit overrides (ErrNotFound: none). Changes take effect within
// TTL.
func (c *Cached) Limits(ctx context.Context, workspaceID string) (Limits, error) {
	return c.limits.get(ctx, workspaceID, func(ctx context.Context) (Limits, error) { return c.Dir.WorkspaceLimits(ctx, workspaceID) })
}

// AllLimits lists every workspace's overrides (the job pool's caps).
func (c *Cached) AllLimits(ctx context.Context) ([]Limits, error) {
	return c.allLimits.get(ctx, "all", c.Dir.AllLimits)
}

// JobConcurrency maps each workspace with a job-concurrency override to it (the job pool's
// WorkspaceOverrides).
func (c *Cached) JobConcurrency(ctx context.Context) (map[string]int, error) {
	ls, err := c.AllLimits(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, l := range ls {
		if l.JobConcurrency != nil {
			out[l.WorkspaceID] = int(*l.JobConcurrency)
		}
	}
	return out, nil
}

// ErrUnavailable wraps directory failures that no cached answer could cover.
var ErrUnavailable = errors.New("directory unavailable")

// staleCache is one kind of answer: a stalecache.Cache whose errors are this package's.
type staleCache[K ~string, V any] struct {
	c *stalecache.Cache[V]
}

func newStaleCache[K ~string, V any](o CacheOptions) *staleCache[K, V] {
	c, err := stalecache.New[V](stalecache.Config{
		TTL: o.TTL, MaxStale: o.MaxStale, NegativeTTL: o.TTL, Size: o.Size, Now: o.Now,
		LookupTimeout: lookupTimeout,
		NotFound:      func(err error) bool { return errors.Is(err, ErrNotFound) },
	})
	if err != nil {
		// withDefaults makes MaxStale at least TTL, the only thing Validate checks.
		panic("directory cache: " + err.Error())
	}
	return &staleCache[K, V]{c: c}
}

// lookupTimeout bounds one directory query, so a frozen directory turns into stale answers
// quickly instead of hanging requests.
const lookupTimeout = 2 * time.Second

func (c *staleCache[K, V]) get(ctx context.Context, k K, load func(context.Context) (V, error)) (V, error) {
	v, _, err := c.c.Get(ctx, string(k), func(ctx context.Context, _ string) (V, error) { return load(ctx) })
	return v, mapError(err)
}

func (c *staleCache[K, V]) refresh(ctx context.Context, k K, load func(context.Context) (V, error)) (V, error) {
	v, err := c.c.Refresh(ctx, string(k), func(ctx context.Context, _ string) (V, error) { return load(ctx) })
	return v, mapError(err)
}

// mapError turns the cache's errors into this package's.
func mapError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, stalecache.ErrNotFound):
		return ErrNotFound
	case errors.Is(err, stalecache.ErrUnavailable):
		return fmt.Errorf("%w: %v", ErrUnavailable, errors.Unwrap(err))
	}
	return err
}
