package directory

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/golang-lru/v2/expirable"
	"golang.org/x/sync/singleflight"
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

// Cached answers the lookups a cell makes on every request from memory, refreshing from the
// directory after TTL and serving the last answer for up to MaxStale while the directory is
// unreachable. Not-found answers are cached too, so unknown tokens do not hammer the directory.
type Cached struct {
	Dir        *Directory
	tokens     *staleCache[string, Token]
	roles      *staleCache[string, string]
	placements *staleCache[string, Placement]
	lists      *staleCache[string, []MemberWorkspace]
	workspaces *staleCache[string, Workspace]
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
	return c.placements.get(ctx, workspaceID, func(ctx context.Context) (Placement, error) { return c.Dir.Placement(ctx, workspaceID) })
}

// FreshPlacement bypasses the cache (after a misdirect) and stores the answer.
func (c *Cached) FreshPlacement(ctx context.Context, workspaceID string) (Placement, error) {
	c.placements.lru.Remove(workspaceID)
	return c.Placement(ctx, workspaceID)
}

// WorkspacesOf lists a user's workspaces.
func (c *Cached) WorkspacesOf(ctx context.Context, userID string) ([]MemberWorkspace, error) {
	return c.lists.get(ctx, userID, func(ctx context.Context) ([]MemberWorkspace, error) { return c.Dir.WorkspacesOf(ctx, userID) })
}

// Workspace returns one workspace.
func (c *Cached) Workspace(ctx context.Context, id string) (Workspace, error) {
	return c.workspaces.get(ctx, id, func(ctx context.Context) (Workspace, error) { return c.Dir.Workspace(ctx, id) })
}

// ErrUnavailable wraps directory failures that no cached answer could cover.
var ErrUnavailable = errors.New("directory unavailable")

type entry[V any] struct {
	val      V
	notFound bool
	at       time.Time
}

type staleCache[K comparable, V any] struct {
	o   CacheOptions
	lru *expirable.LRU[K, entry[V]]
	sf  singleflight.Group
}

func newStaleCache[K comparable, V any](o CacheOptions) *staleCache[K, V] {
	return &staleCache[K, V]{o: o, lru: expirable.NewLRU[K, entry[V]](o.Size, nil, o.MaxStale)}
}

// lookupTimeout bounds one directory query, so a frozen directory turns into stale answers
// quickly instead of hanging requests.
const lookupTimeout = 2 * time.Second

func (c *staleCache[K, V]) get(ctx context.Context, k K, load func(context.Context) (V, error)) (V, error) {
	e, ok := c.lru.Get(k)
	if ok && c.o.Now().Sub(e.at) < c.o.TTL {
		return e.result()
	}
	key := fmt.Sprint(k)
	r, err, _ := c.sf.Do(key, func() (any, error) {
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), lookupTimeout)
		defer cancel()
		v, err := load(lctx)
		if err == nil || errors.Is(err, ErrNotFound) {
			ne := entry[V]{val: v, notFound: err != nil, at: c.o.Now()}
			c.lru.Add(k, ne)
			return ne, nil
		}
		return nil, err
	})
	if err != nil {
		if ok && c.o.Now().Sub(e.at) < c.o.MaxStale {
			return e.result()
		}
		var zero V
		return zero, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	return r.(entry[V]).result()
}

func (e entry[V]) result() (V, error) {
	if e.notFound {
		return e.val, ErrNotFound
	}
	return e.val, nil
}
