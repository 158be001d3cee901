package directory

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

func TestStaleCacheServesStaleOnlyWhileBounded(t *testing.T) {
	now := time.Unix(1000, 0)
	c := newStaleCache[string, string](CacheOptions{TTL: time.Second, MaxStale: 10 * time.Second, Size: 10,
		Now: func() time.Time { return now }}.withDefaults())
	var calls atomic.Int32
	fail := false
	load := func(context.Context) (string, error) {
		calls.Add(1)
		if fail {
			return "", errors.New("directory down")
		}
		return "v", nil
	}
	ctx := context.Background()
	if v, err := c.get(ctx, "k", load); v != "v" || err != nil {
		t.Fatalf("first: %q %v", v, err)
	}
	if _, _ = c.get(ctx, "k", load); calls.Load() != 1 {
		t.Fatalf("fresh entry reloaded: %d calls", calls.Load())
	}
	fail = true
	now = now.Add(5 * time.Second) // stale, within MaxStale
	if v, err := c.get(ctx, "k", load); v != "v" || err != nil {
		t.Fatalf("stale within bound: %q %v", v, err)
	}
	now = now.Add(6 * time.Second) // beyond MaxStale
	if _, err := c.get(ctx, "k", load); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("beyond bound: %v", err)
	}
	if _, err := c.get(ctx, "other", load); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("uncached: %v", err)
	}
}

func TestStaleCacheCachesNotFound(t *testing.T) {
	c := newStaleCache[string, string](CacheOptions{TTL: time.Minute}.withDefaults())
	calls := 0
	load := func(context.Context) (string, error) { calls++; return "", ErrNotFound }
	for i := 0; i < 3; i++ {
		if _, err := c.get(context.Background(), "k", load); !errors.Is(err, ErrNotFound) {
			t.Fatal(err)
		}
	}
	if calls != 1 {
		t.Fatalf("not-found reloaded %d times", calls)
	}
}

func TestTokenShape(t *testing.T) {
	s := NewTokenSecret()
	if !TokenShapeValid(s) {
		t.Fatalf("new token %q invalid", s)
	}
	for _, bad := range []string{"", "svc_pat_", s[:len(s)-1], "svc_dlg_" + s[8:], s + "x", s[:20] + "!" + s[21:]} {
		if TokenShapeValid(bad) {
			t.Errorf("TokenShapeValid(%q)", bad)
		}
	}
}
