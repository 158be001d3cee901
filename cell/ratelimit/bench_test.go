package ratelimit

import (
	"context"
	"net/netip"
	"strconv"
	"testing"
)

// BenchmarkAdmission is what admission costs per request in memory (BENCHMARKS.md, "Noisy
// neighbours"): before is the former single check (workspace and token buckets before
// authentication); member is a member's request now (address check, token bucket, known-good
// mark, workspace bucket after membership); refused is a bogus token from an address over its
// failed-authentication limit, answered without a token lookup.
func BenchmarkAdmission(b *testing.B) {
	ctx := context.Background()
	shape := Limit{Rate: 1e9, Burst: 1 << 30}
	addr := netip.MustParseAddr("203.0.113.7")
	b.Run("before", func(b *testing.B) {
		l := &Limiter{Workspace: shape, Token: shape}
		for b.Loop() {
			if err := l.Allow(ctx, "ws_a", "Bearer svc_pat_x"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("member", func(b *testing.B) {
		l := &Limiter{Workspace: shape, Token: shape, Address: Limit{Rate: 10, Burst: 50}}
		for b.Loop() {
			if err := l.CheckAddress(addr, "Bearer svc_pat_x"); err != nil {
				b.Fatal(err)
			}
			if err := l.AllowToken("Bearer svc_pat_x"); err != nil {
				b.Fatal(err)
			}
			l.Authenticated("Bearer svc_pat_x")
			if err := l.AllowWorkspace(ctx, "ws_a"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("refused", func(b *testing.B) {
		l := &Limiter{Workspace: shape, Token: shape, Address: Limit{Rate: 0.001, Burst: 1}}
		l.AuthFailed(addr, "")
		i := 0
		for b.Loop() {
			i++
			if err := l.CheckAddress(addr, "Bearer svc_pat_"+strconv.Itoa(i)); err == nil {
				b.Fatal("not refused")
			}
		}
	})
}
