package main

import (
	"strings"
	"testing"
	"time"

	"slidecells/router"
	"slidecells/router/placement"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestDefaults(t *testing.T) {
	t.Parallel()
	s, err := loadSettings(env(map[string]string{"DIRECTORY_DATABASE_URL": "postgres://dir"}))
	if err != nil {
		t.Fatal(err)
	}
	c := s.Router
	if s.ListenAddr != "127.0.0.1:8080" || s.InternalAddr != defaultInternalAddr || c.Cache.TTL != placement.DefaultTTL ||
		c.Cache.MaxStale != placement.DefaultMaxStale || c.Cache.NegativeTTL != placement.DefaultNegativeTTL ||
		c.CellTimeout != router.DefaultCellTimeout || c.BreakerFailures != router.DefaultBreakerFailures ||
		c.CellsRefresh != router.DefaultCellsRefresh || c.MaxRetryBody != router.DefaultMaxRetryBody || !c.Cache.Revalidate ||
		c.BodyTimeout != router.DefaultBodyTimeout || c.BodyMinRate != router.DefaultBodyMinRate ||
		c.MaxInFlightPerCell != router.DefaultMaxInFlightPerCell || c.MaxInFlightPerWorkspace != router.DefaultMaxInFlightPerWorkspace ||
		s.Server.IdleTimeout != router.DefaultIdleTimeout || s.Server.MaxConns != router.DefaultMaxConns ||
		s.Server.ReadHeaderTimeout != router.DefaultReadHeaderTimeout || s.Server.SendTimeout != router.DefaultSendTimeout {
		t.Errorf("defaults: %+v", s)
	}
	if !s.UnknownHashKeyDerived || len(c.UnknownHashKey) == 0 {
		t.Errorf("no derived unknown-workspace hash key")
	}
}

func TestSettingsAreRead(t *testing.T) {
	t.Parallel()
	s, err := loadSettings(env(map[string]string{
		"DIRECTORY_DATABASE_URL":             "postgres://dir",
		"ROUTER_LISTEN_ADDR":                 "127.0.0.1:0",
		"ROUTER_PLACEMENT_TTL":               "1s",
		"ROUTER_PLACEMENT_MAX_STALE":         "6s",
		"ROUTER_CELL_TIMEOUT":                "1s",
		"ROUTER_BREAKER_FAILURES":            "3",
		"ROUTER_BREAKER_OPEN_TIMEOUT":        "2s",
		"ROUTER_UNKNOWN_HASH_KEY":            "0123456789abcdef",
		"ROUTER_PLACEMENT_REVALIDATE":        "false",
		"ROUTER_INTERNAL_ADDR":               "127.0.0.1:9999",
		"ROUTER_IDLE_TIMEOUT":                "5s",
		"ROUTER_SEND_TIMEOUT":                "7s",
		"ROUTER_MAX_IN_FLIGHT_PER_CELL":      "500",
		"ROUTER_MAX_IN_FLIGHT_PER_WORKSPACE": "50",
		"ROUTER_MAX_CONNS":                   "100",
		"ROUTER_BODY_TIMEOUT":                "3s",
		"ROUTER_BODY_MIN_RATE":               "1000",
	}))
	if err != nil {
		t.Fatal(err)
	}
	c := s.Router
	if s.ListenAddr != "127.0.0.1:0" || c.Cache.TTL != time.Second || c.Cache.MaxStale != 6*time.Second || c.Cache.Revalidate ||
		c.CellTimeout != time.Second || c.BreakerFailures != 3 || c.BreakerOpenTimeout != 2*time.Second ||
		string(c.UnknownHashKey) != "0123456789abcdef" || s.UnknownHashKeyDerived ||
		s.InternalAddr != "127.0.0.1:9999" || s.Server.IdleTimeout != 5*time.Second || s.Server.MaxConns != 100 ||
		s.Server.SendTimeout != 7*time.Second || c.MaxInFlightPerCell != 500 || c.MaxInFlightPerWorkspace != 50 ||
		c.BodyTimeout != 3*time.Second || c.BodyMinRate != 1000 {
		t.Errorf("settings: %+v", s)
	}
}

func TestBadSettingsAreNamed(t *testing.T) {
	t.Parallel()
	_, err := loadSettings(env(map[string]string{
		"ROUTER_LISTEN_ADDR":          "nowhere",
		"ROUTER_PLACEMENT_TTL":        "10m",
		"ROUTER_PLACEMENT_MAX_STALE":  "1m",
		"ROUTER_NEGATIVE_TTL":         "0s",
		"ROUTER_CELL_TIMEOUT":         "soon",
		"ROUTER_BREAKER_FAILURES":     "0",
		"ROUTER_UNKNOWN_HASH_KEY":     "short",
		"ROUTER_PLACEMENT_REVALIDATE": "maybe",
		"LOG_LEVEL":                   "loud",
		"ROUTER_INTERNAL_ADDR":        "nowhere",
		"ROUTER_MAX_CONNS":            "1",
		"ROUTER_BODY_MIN_RATE":        "0",
	}))
	if err == nil {
		t.Fatal("bad settings accepted")
	}
	for _, name := range []string{
		"DIRECTORY_DATABASE_URL", "ROUTER_LISTEN_ADDR", "ROUTER_PLACEMENT_MAX_STALE", "ROUTER_NEGATIVE_TTL",
		"ROUTER_CELL_TIMEOUT", "ROUTER_BREAKER_FAILURES", "ROUTER_UNKNOWN_HASH_KEY", "LOG_LEVEL", "ROUTER_PLACEMENT_REVALIDATE",
		"ROUTER_INTERNAL_ADDR", "ROUTER_MAX_CONNS", "ROUTER_BODY_MIN_RATE",
	} {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("error does not name %s: %v", name, err)
		}
	}
}

// TestInternalAddr: the old name is still read, and the internal listener can never be the
// public one.
func TestInternalAddr(t *testing.T) {
	t.Parallel()
	s, err := loadSettings(env(map[string]string{"DIRECTORY_DATABASE_URL": "postgres://dir", "ROUTER_ADMIN_ADDR": ":9090"}))
	if err != nil || s.InternalAddr != ":9090" {
		t.Errorf("ROUTER_ADMIN_ADDR: %q, %v", s.InternalAddr, err)
	}
	for _, m := range []map[string]string{
		{"ROUTER_LISTEN_ADDR": ":8080", "ROUTER_INTERNAL_ADDR": ":8080"},
		{"ROUTER_INTERNAL_ADDR": ":9091", "ROUTER_ADMIN_ADDR": ":9090"},
	} {
		m["DIRECTORY_DATABASE_URL"] = "postgres://dir"
		if _, err := loadSettings(env(m)); err == nil {
			t.Errorf("%v accepted", m)
		}
	}
}
