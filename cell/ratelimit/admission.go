package ratelimit

import (
	"context"
	"net/netip"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
)

// Admission order (cell/api's pipeline): before authentication only the buckets an outsider
// owns are charged — the client address's failed authentications (CheckAddress, AuthFailed)
// and the presented credential's (AllowToken, keyed by a hash of it) — so that no request
// without a valid token can spend a workspace's share. The workspace's bucket is charged after
// authentication and membership (AllowWorkspace), so only members spend it.

// KnownGoodFor is how long a credential that authenticated is let past its address's
// failed-authentication limit (a member behind the same address as a flood keeps working).
const KnownGoodFor = time.Hour

// AddressKey is the bucket key of a client address: IPv4 addresses as they are, IPv6 ones by
// their /64 (one host usually holds a whole /64).
func AddressKey(a netip.Addr) netip.Addr {
	a = a.Unmap()
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p.Addr()
	}
	return a
}

type admission struct {
	once sync.Once
	addr *lru.Cache[netip.Addr, *bucket]
	good *lru.Cache[[16]byte, time.Time]
}

func (l *Limiter) initAdmission() {
	l.adm.once.Do(func() {
		l.adm.addr, _ = lru.New[netip.Addr, *bucket](DefaultBuckets)
		l.adm.good, _ = lru.New[[16]byte, time.Time](DefaultBuckets)
	})
}

func (l *Limiter) addressOn() bool { return !l.Address.Off && l.Address.Rate > 0 }

// CheckAddress refuses, from memory, a request from an address whose failed authentications
// are over the Address limit (429 RATE_LIMITED, X-RateLimit-Scope: address), unless its
// credential authenticated recently (Authenticated). It takes nothing from the bucket: only a
// failure does (AuthFailed). An invalid address (no client address known) is never refused.
func (l *Limiter) CheckAddress(a netip.Addr, authorization string) error {
	if !l.addressOn() || !a.IsValid() {
		return nil
	}
	l.initAdmission()
	b, ok := l.adm.addr.Get(AddressKey(a))
	if !ok {
		return nil
	}
	now := l.now()
	if b.lim.TokensAt(now) >= 1 {
		return nil
	}
	if authorization != "" {
		if until, ok := l.adm.good.Get(hashKey(authorization)); ok && now.Before(until) {
			return nil
		}
	}
	r := b.lim.ReserveN(now, 1)
	d := delay(r, now)
	if d <= 0 { // refilled meanwhile
		r.CancelAt(now)
		return nil
	}
	return limited("address", d)
}

// AuthFailed takes one token from the address's failed-authentication bucket and forgets the
// credential as known good.
func (l *Limiter) AuthFailed(a netip.Addr, authorization string) {
	if authorization != "" && l.adm.good != nil {
		l.adm.good.Remove(hashKey(authorization))
	}
	if !l.addressOn() || !a.IsValid() {
		return
	}
	l.initAdmission()
	key := AddressKey(a)
	b, ok := l.adm.addr.Get(key)
	if !ok || b.shape != l.Address {
		b = newBucket(l.Address)
		l.adm.addr.Add(key, b)
	}
	b.lim.AllowN(l.now(), 1)
}

// Authenticated remembers that the credential authenticated (for KnownGoodFor), so that
// CheckAddress lets it past its address's failures.
func (l *Limiter) Authenticated(authorization string) {
	if !l.addressOn() || authorization == "" {
		return
	}
	l.initAdmission()
	key := hashKey(authorization)
	now := l.now()
	if until, ok := l.adm.good.Peek(key); ok && until.Sub(now) > KnownGoodFor/2 {
		return
	}
	l.adm.good.Add(key, now.Add(KnownGoodFor))
}

// AllowToken takes one token from the credential's bucket (the Authorization header value,
// kept only as a hash), or returns the 429 (X-RateLimit-Scope: token).
func (l *Limiter) AllowToken(authorization string) error {
	if authorization == "" || l.Token.Off || l.Token.Rate <= 0 {
		return nil
	}
	l.init()
	now := l.now()
	key := hashKey(authorization)
	b, ok := l.tok.Get(key)
	if !ok || b.shape != l.Token {
		b = newBucket(l.Token)
		l.tok.Add(key, b)
	}
	if d := delay(b.lim.ReserveN(now, 1), now); d > 0 {
		return limited("token", d)
	}
	return nil
}

// AllowWorkspace takes one token from the workspace's bucket (its override where set), or
// returns the 429 (X-RateLimit-Scope: workspace). Call it only for a member of ws.
func (l *Limiter) AllowWorkspace(ctx context.Context, ws string) error {
	if ws == "" {
		return nil
	}
	l.init()
	shape := l.workspaceLimit(ctx, ws)
	if shape.Off {
		return nil
	}
	now := l.now()
	b, ok := l.ws.Get(ws)
	if !ok || b.shape != shape {
		b = newBucket(shape)
		l.ws.Add(ws, b)
	}
	if d := delay(b.lim.ReserveN(now, 1), now); d > 0 {
		return limited("workspace", d)
	}
	return nil
}
