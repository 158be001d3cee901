package main

import (
	"crypto/sha256"
	"time"

	"slidecells/router"
	"slidecells/router/placement"
	"slidecells/shared/config"
)

// defaultInternalAddr is where /livez, /readyz and /metrics answer unless
// ROUTER_INTERNAL_ADDR says otherwise.
const defaultInternalAddr = "127.0.0.1:9080"

// settings is the router's static configuration. Every field comes from one environment
// variable; router/README.md lists them.
type settings struct {
	ListenAddr      string
	InternalAddr    string
	DirectoryURL    string
	ShutdownTimeout time.Duration
	LogLevel        string
	Server          router.ServerConfig
	// UnknownHashKeyDerived is true when ROUTER_UNKNOWN_HASH_KEY was not set.
	UnknownHashKeyDerived bool
	Router                router.Config
}

// loadSettings reads and checks the configuration; the error names every bad setting.
func loadSettings(getenv func(string) string) (settings, error) {
	l := &config.Loader{Getenv: getenv}
	var s settings
	s.ListenAddr = l.Addr("ROUTER_LISTEN_ADDR", "127.0.0.1:8080", false)
	// The internal listener serves /livez, /readyz and /metrics, which the public one never
	// does. ROUTER_ADMIN_ADDR is its old name, still read.
	s.InternalAddr = l.Addr("ROUTER_INTERNAL_ADDR", "", false)
	if old := l.Addr("ROUTER_ADMIN_ADDR", "", false); old != "" {
		if s.InternalAddr != "" && s.InternalAddr != old {
			l.Fail("ROUTER_ADMIN_ADDR", "is the old name of ROUTER_INTERNAL_ADDR and names another address; set only ROUTER_INTERNAL_ADDR")
		}
		s.InternalAddr = old
	}
	if s.InternalAddr == "" {
		s.InternalAddr = defaultInternalAddr
	}
	if s.InternalAddr == s.ListenAddr {
		l.Fail("ROUTER_INTERNAL_ADDR", "must differ from ROUTER_LISTEN_ADDR: metrics and health never answer on the public port")
	}
	s.Server = router.ServerConfig{
		ReadHeaderTimeout: l.PositiveDuration("ROUTER_READ_HEADER_TIMEOUT", router.DefaultReadHeaderTimeout),
		IdleTimeout:       l.PositiveDuration("ROUTER_IDLE_TIMEOUT", router.DefaultIdleTimeout),
		SendTimeout:       l.PositiveDuration("ROUTER_SEND_TIMEOUT", router.DefaultSendTimeout),
		MaxConns:          l.Int("ROUTER_MAX_CONNS", router.DefaultMaxConns, 16, 1_000_000),
	}
	s.DirectoryURL = l.String("DIRECTORY_DATABASE_URL", "", true)
	s.ShutdownTimeout = l.PositiveDuration("ROUTER_SHUTDOWN_TIMEOUT", 20*time.Second)
	s.LogLevel = l.LogLevel()

	c := &s.Router
	c.Cache = placement.Config{
		TTL:           l.PositiveDuration("ROUTER_PLACEMENT_TTL", placement.DefaultTTL),
		MaxStale:      l.PositiveDuration("ROUTER_PLACEMENT_MAX_STALE", placement.DefaultMaxStale),
		NegativeTTL:   l.PositiveDuration("ROUTER_NEGATIVE_TTL", placement.DefaultNegativeTTL),
		LookupTimeout: l.PositiveDuration("ROUTER_DIRECTORY_TIMEOUT", placement.DefaultLookupTimeout),
		Size:          l.Int("ROUTER_PLACEMENT_CACHE_SIZE", placement.DefaultSize, 1, 100_000_000),
		Revalidate:    l.OneOf("ROUTER_PLACEMENT_REVALIDATE", "true", "true", "false") == "true",
	}
	if c.Cache.MaxStale < c.Cache.TTL {
		l.Fail("ROUTER_PLACEMENT_MAX_STALE", "%v is shorter than ROUTER_PLACEMENT_TTL (%v)", c.Cache.MaxStale, c.Cache.TTL)
	}
	c.CellTimeout = l.PositiveDuration("ROUTER_CELL_TIMEOUT", router.DefaultCellTimeout)
	c.DialTimeout = l.PositiveDuration("ROUTER_DIAL_TIMEOUT", router.DefaultDialTimeout)
	c.MaxIdleConnsPerCell = l.Int("ROUTER_MAX_IDLE_CONNS_PER_CELL", router.DefaultMaxIdleConnsPerCell, 1, 100_000)
	c.BreakerFailures = uint32(l.Int("ROUTER_BREAKER_FAILURES", router.DefaultBreakerFailures, 1, 1_000_000))
	c.BreakerOpenTimeout = l.PositiveDuration("ROUTER_BREAKER_OPEN_TIMEOUT", router.DefaultBreakerOpenTimeout)
	c.BreakerHalfOpenRequests = uint32(l.Int("ROUTER_BREAKER_HALF_OPEN_REQUESTS", router.DefaultBreakerHalfOpenRequests, 1, 1_000_000))
	c.ProbeInterval = l.PositiveDuration("ROUTER_PROBE_INTERVAL", router.DefaultProbeInterval)
	c.ProbeTimeout = l.PositiveDuration("ROUTER_PROBE_TIMEOUT", router.DefaultProbeTimeout)
	c.ProbeFailures = l.Int("ROUTER_PROBE_FAILURES", router.DefaultProbeFailures, 1, 1000)
	c.CellsRefresh = l.PositiveDuration("ROUTER_CELLS_REFRESH", router.DefaultCellsRefresh)
	c.MaxRetryBody = int64(l.Int("ROUTER_MAX_RETRY_BODY", router.DefaultMaxRetryBody, 1, 64<<20))
	c.MaxInFlightPerCell = l.Int("ROUTER_MAX_IN_FLIGHT_PER_CELL", router.DefaultMaxInFlightPerCell, 1, 1_000_000)
	c.MaxInFlightPerWorkspace = l.Int("ROUTER_MAX_IN_FLIGHT_PER_WORKSPACE", router.DefaultMaxInFlightPerWorkspace, 1, 1_000_000)
	c.BodyTimeout = l.PositiveDuration("ROUTER_BODY_TIMEOUT", router.DefaultBodyTimeout)
	c.BodyMinRate = int64(l.Int("ROUTER_BODY_MIN_RATE", router.DefaultBodyMinRate, 1, 1<<30))

	if key := l.String("ROUTER_UNKNOWN_HASH_KEY", "", false); key != "" {
		if len(key) < 16 {
			l.Fail("ROUTER_UNKNOWN_HASH_KEY", "must be at least 16 characters")
		}
		c.UnknownHashKey = []byte(key)
	} else {
		// Stable across restarts and across replicas that share the directory URL, and secret as
		// long as that URL's password is. An explicit key is better; README says so.
		sum := sha256.Sum256([]byte("slidecells router unknown-workspace hash\x00" + s.DirectoryURL))
		c.UnknownHashKey = sum[:]
		s.UnknownHashKeyDerived = true
	}
	return s, l.Err()
}
