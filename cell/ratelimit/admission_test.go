package ratelimit

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"slidecells/shared/problem"
)

// TestAddressFailures: an address is refused once its failed authentications are over the
// limit (no token taken by the check itself), a credential that authenticated is let past it,
// another address is not affected, IPv6 addresses share their /64, and the bucket refills.
func TestAddressFailures(t *testing.T) {
	now := time.Unix(1000, 0)
	l := &Limiter{Address: Limit{Rate: 1, Burst: 3}, Now: func() time.Time { return now }}
	a, other := netip.MustParseAddr("203.0.113.7"), netip.MustParseAddr("203.0.113.8")
	l.Authenticated("Bearer good")
	for i := range 3 {
		if err := l.CheckAddress(a, "Bearer bad"); err != nil {
			t.Fatalf("failure %d refused: %v", i, err)
		}
		l.AuthFailed(a, "Bearer bad")
	}
	pe := problem.As(l.CheckAddress(a, "Bearer bad"))
	if pe.Code != problem.RateLimited || pe.RetryAfter != 1 || pe.Header.Get(ScopeHeader) != "address" {
		t.Fatalf("over the limit: %+v", pe)
	}
	if err := l.CheckAddress(a, "Bearer good"); err != nil {
		t.Fatalf("known good credential: %v", err)
	}
	if err := l.CheckAddress(other, "Bearer bad"); err != nil {
		t.Fatalf("other address: %v", err)
	}
	// A revoked credential fails once more and is then refused like the rest.
	l.AuthFailed(a, "Bearer good")
	if err := l.CheckAddress(a, "Bearer good"); err == nil {
		t.Fatal("a credential that failed stayed known good")
	}
	v6a, v6b := netip.MustParseAddr("2001:db8:1:2::1"), netip.MustParseAddr("2001:db8:1:2:ffff::9")
	for range 3 {
		l.AuthFailed(v6a, "")
	}
	if err := l.CheckAddress(v6b, ""); err == nil {
		t.Fatal("the same /64 has its own bucket")
	}
	now = now.Add(time.Second)
	if err := l.CheckAddress(a, "Bearer bad"); err != nil {
		t.Fatalf("after the refill: %v", err)
	}
	off := &Limiter{}
	for range 100 {
		off.AuthFailed(a, "x")
	}
	if err := off.CheckAddress(a, "x"); err != nil {
		t.Fatal(err)
	}
}

// TestWorkspaceAndTokenApart: the workspace and the token buckets are charged separately.
func TestWorkspaceAndTokenApart(t *testing.T) {
	now := time.Unix(1000, 0)
	l := &Limiter{Workspace: Limit{Rate: 1, Burst: 2}, Token: Limit{Rate: 1, Burst: 3}, Now: func() time.Time { return now }}
	for range 3 {
		if err := l.AllowToken("Bearer t"); err != nil {
			t.Fatal(err)
		}
	}
	if problem.As(l.AllowToken("Bearer t")).Header.Get(ScopeHeader) != "token" {
		t.Fatal("token over its burst")
	}
	ctx := context.Background()
	for range 2 {
		if err := l.AllowWorkspace(ctx, "ws_a"); err != nil {
			t.Fatal(err)
		}
	}
	if problem.As(l.AllowWorkspace(ctx, "ws_a")).Header.Get(ScopeHeader) != "workspace" {
		t.Fatal("workspace over its burst")
	}
	if err := l.AllowWorkspace(ctx, "ws_b"); err != nil {
		t.Fatal(err)
	}
}
