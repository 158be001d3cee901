// Package ratelimit is a cell's noisy-neighbour protection at its door: token buckets
// (golang.org/x/time/rate) per client address (failed authentications), per token and per
// workspace, all checked in memory before any cell database is touched, so that a flooding
// client is answered 429 RATE_LIMITED with Retry-After and the cell's database, pools and
// compile slots stay with the others. Only members spend a workspace's bucket: it is charged
// after authentication and membership (see admission.go).
//
// A workspace's rate and burst come from the cell's defaults or from its overrides in the
// directory (cellctl workspaces limit), read through the cell's directory cache. Buckets live in
// this process: a cell with several replicas admits up to that many times the rate.
package ratelimit

import (
	"context"
	"crypto/sha256"
	"errors"
	"math"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"golang.org/x/time/rate"

	"slidecells/shared/directory"
	"slidecells/shared/problem"
)

// Limit is one bucket's shape: Rate tokens a second, at most Burst at once (at least 1). A
// Rate of 0 or Off disables the bucket.
type Limit struct {
	Rate  float64
	Burst int
	Off   bool
}

// Overrides gives a workspace's overrides (satisfied by *directory.Cached); directory.ErrNotFound
// means none.
type Overrides interface {
	Limits(ctx context.Context, workspaceID string) (directory.Limits, error)
}

// DefaultBuckets bounds the buckets kept in memory per kind (least recently used go first; a
// bucket that comes back starts full).
const DefaultBuckets = 100_000

// Limiter holds the buckets.
type Limiter struct {
	// Workspace and Token are the default limits; Off disables a kind.
	Workspace, Token Limit
	// Address is the limit of failed authentications per client address (see CheckAddress).
	Address Limit
	// Overrides, when set, gives per-workspace overrides of Workspace.
	Overrides Overrides
	// Now is the clock; nil is time.Now.
	Now func() time.Time

	once sync.Once
	ws   *lru.Cache[string, *bucket]
	tok  *lru.Cache[[16]byte, *bucket]
	adm  admission
}

type bucket struct {
	lim   *rate.Limiter
	shape Limit
}

func (l *Limiter) init() {
	l.once.Do(func() {
		l.ws, _ = lru.New[string, *bucket](DefaultBuckets)
		l.tok, _ = lru.New[[16]byte, *bucket](DefaultBuckets)
	})
}

func (l *Limiter) now() time.Time {
	if l.Now != nil {
		return l.Now()
	}
	return time.Now()
}

func newBucket(s Limit) *bucket {
	r := rate.Limit(s.Rate)
	return &bucket{lim: rate.NewLimiter(r, max(s.Burst, 1)), shape: s}
}

// workspaceLimit is the workspace's shape now: its override where set, else the default. An
// unreachable directory keeps the default (the cached answer serves while it lasts).
func (l *Limiter) workspaceLimit(ctx context.Context, ws string) Limit {
	s := l.Workspace
	if s.Rate <= 0 {
		s.Off = true
	}
	if l.Overrides == nil {
		return s
	}
	o, err := l.Overrides.Limits(ctx, ws)
	if err != nil {
		return s
	}
	if o.RequestsPerSecond != nil {
		s.Rate, s.Off = *o.RequestsPerSecond, false
	}
	if o.Burst != nil {
		s.Burst, s.Off = int(min(*o.Burst, math.MaxInt32)), false
	}
	if s.Rate <= 0 {
		s.Off = true
	}
	return s
}

// Allow takes one token from the workspace's bucket (when ws is not empty) and from the token's
// (when authorization is not empty: the Authorization header value, kept only as a hash), or
// returns the 429 to answer: RATE_LIMITED with Retry-After (seconds, rounded up) and the scope
// that refused in X-RateLimit-Scope. A refused request takes no token from either bucket.
func (l *Limiter) Allow(ctx context.Context, ws, authorization string) error {
	l.init()
	now := l.now()
	var held []*rate.Reservation
	release := func() {
		for _, r := range held {
			r.CancelAt(now)
		}
	}
	if ws != "" {
		if shape := l.workspaceLimit(ctx, ws); !shape.Off {
			b, ok := l.ws.Get(ws)
			if !ok || b.shape != shape {
				b = newBucket(shape)
				l.ws.Add(ws, b)
			}
			r := b.lim.ReserveN(now, 1)
			if d := delay(r, now); d > 0 {
				return limited("workspace", d)
			}
			held = append(held, r)
		}
	}
	if authorization != "" && !l.Token.Off && l.Token.Rate > 0 {
		key := hashKey(authorization)
		b, ok := l.tok.Get(key)
		if !ok || b.shape != l.Token {
			b = newBucket(l.Token)
			l.tok.Add(key, b)
		}
		r := b.lim.ReserveN(now, 1)
		if d := delay(r, now); d > 0 {
			release()
			return limited("token", d)
		}
	}
	return nil
}

// delay is how long the reservation would wait; a refused one is cancelled (no token taken).
func delay(r *rate.Reservation, now time.Time) time.Duration {
	if !r.OK() {
		return time.Hour // a burst of 0: never
	}
	d := r.DelayFrom(now)
	if d > 0 {
		r.CancelAt(now)
	}
	return d
}

func hashKey(s string) [16]byte {
	sum := sha256.Sum256([]byte(s))
	var k [16]byte
	copy(k[:], sum[:16])
	return k
}

// ScopeHeader names the bucket that refused a request.
const ScopeHeader = problem.HeaderRateLimitScope

func limited(scope string, d time.Duration) error {
	return problem.ErrRateLimited(scope, int(math.Ceil(d.Seconds())), "too many requests for this %s; retry after the time in Retry-After", scope)
}

// IsLimited reports whether err is a 429 from Allow.
func IsLimited(err error) bool {
	var pe *problem.Error
	return errors.As(err, &pe) && pe.Code == problem.RateLimited
}
