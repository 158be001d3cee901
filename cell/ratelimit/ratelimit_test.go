package ratelimit

import (
	"context"
	"testing"
	"time"

	"slidecells/shared/directory"
	"slidecells/shared/directory/directorytest"
	"slidecells/shared/problem"
)

func TestBuckets(t *testing.T) {
	ctx := context.Background()
	now := time.Unix(1000, 0)
	o := directorytest.Limits{}
	l := &Limiter{Workspace: Limit{Rate: 2, Burst: 3}, Token: Limit{Rate: 10, Burst: 5}, Overrides: o, Now: func() time.Time { return now }}
	allowed := func(ws, tok string, n int) (int, error) {
		ok := 0
		var last error
		for range n {
			if err := l.Allow(ctx, ws, tok); err != nil {
				last = err
				continue
			}
			ok++
		}
		return ok, last
	}
	// A workspace gets its burst, then 429 with Retry-After and its scope.
	n, err := allowed("ws_a", "", 10)
	pe := problem.As(err)
	if n != 3 || pe.Code != problem.RateLimited || pe.RetryAfter != 1 || !pe.Retryable || pe.Header.Get(ScopeHeader) != "workspace" {
		t.Fatalf("burst: %d allowed, %+v", n, pe)
	}
	// Another workspace is not affected; the refused requests took nothing: after 1 s, 2 more.
	if n, _ := allowed("ws_b", "", 3); n != 3 {
		t.Fatalf("other workspace: %d", n)
	}
	now = now.Add(time.Second)
	if n, _ := allowed("ws_a", "", 5); n != 2 {
		t.Fatalf("refill: %d", n)
	}
	// A token over its rate is refused across workspaces, and its refusal does not use the
	// workspace's token.
	if n, err := allowed("", "Bearer one", 8); n != 5 || problem.As(err).Header.Get(ScopeHeader) != "token" {
		t.Fatalf("token: %d %v", n, err)
	}
	if err := l.Allow(ctx, "ws_c", "Bearer one"); problem.As(err).Header.Get(ScopeHeader) != "token" {
		t.Fatalf("token in a workspace: %v", err)
	}
	if n, _ := allowed("ws_c", "Bearer two", 3); n != 3 {
		t.Fatalf("the refused token used ws_c's tokens: %d", n)
	}
	// An override takes effect at the next request (a new, full bucket of its shape).
	r, b := 100.0, int64(50)
	o["ws_a"] = directory.Limits{RequestsPerSecond: &r, Burst: &b}
	if n, _ := allowed("ws_a", "", 60); n != 50 {
		t.Fatalf("override: %d", n)
	}
	// A long wait gives a longer Retry-After; rate 0 is no limit.
	slow := &Limiter{Workspace: Limit{Rate: 0.1, Burst: 1}, Now: func() time.Time { return now }}
	_ = slow.Allow(ctx, "ws_s", "")
	if pe := problem.As(slow.Allow(ctx, "ws_s", "")); pe.RetryAfter != 10 {
		t.Fatalf("retry after %d", pe.RetryAfter)
	}
	off := &Limiter{}
	for range 1000 {
		if err := off.Allow(ctx, "ws_x", "Bearer x"); err != nil {
			t.Fatal(err)
		}
	}
}
