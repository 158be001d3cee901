// Command cell runs one cell's backend: API v1 for the workspaces the cell hosts.
//
// Configuration is read from the environment (see README.md, "Configuration"); an invalid
// setting stops start-up with a message naming it.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"
	"gocloud.dev/blob"
	_ "gocloud.dev/blob/fileblob" // file:// buckets
	_ "gocloud.dev/blob/memblob"  // mem:// buckets (tests)
	_ "gocloud.dev/blob/s3blob"   // s3:// buckets (production)

	"slidecells/cell"
	"slidecells/cell/api"
	"slidecells/cell/authoring"
	"slidecells/cell/idempotency"
	"slidecells/cell/maintenance"
	"slidecells/cell/preview"
	"slidecells/cell/ratelimit"
	"slidecells/cell/render"
	"slidecells/migrations"
	"slidecells/shared/config"
	"slidecells/shared/db"
	"slidecells/shared/directory"
	"slidecells/shared/failpoint"
	"slidecells/shared/httpserve"
	"slidecells/shared/ids"
	"slidecells/shared/logging"
	"slidecells/shared/ticket"
	"slidecells/shared/tracing"
)

type settings struct {
	CellID     string
	ListenAddr string
	// InternalTLS: a second listener serving the same API over TLS for callers inside the
	// cluster that cross nodes (the preview host's pulls): CELL_INTERNAL_TLS_LISTEN_ADDR with
	// CELL_TLS_CERT_FILE and CELL_TLS_KEY_FILE (a certificate of the cell's private CA).
	InternalTLSAddr         string
	TLSCertFile, TLSKeyFile string
	DatabaseURL             string
	DirectoryURL            string
	AuthTTL                 time.Duration
	AuthMaxStale            time.Duration
	ShutdownGrace           time.Duration
	// Render is the render coordinator's configuration; nil when RENDER_WORKERS_CONFIG is unset
	// (the cell then has no render capacity and says so).
	Render *render.Config
	// Retention is the render retention's settings (RENDER_RETENTION_*).
	Retention render.RetentionConfig
	// TicketSigner signs admission tickets and preview access (RENDER_TICKET_SIGNING_KEY_FILE).
	TicketSigner *ticket.Signer
	// PublicURL is the router's public base; preview URLs point at it (CELL_PUBLIC_URL).
	PublicURL  *url.URL
	PreviewTTL time.Duration
	// RenderWait bounds a validation's or a screenshot's wait for its render (CELL_RENDER_WAIT).
	RenderWait    time.Duration
	IdemRetention time.Duration
	BlobURL       string
	Failpoints    failpoint.Points
	BenchNoIdem   bool
	LogLevel      string
	JobSlots      int
	JobLease      time.Duration
	CompileSlots  int
	// PreviewCredentials are the preview host's service credentials the cell accepts
	// (PREVIEW_SERVICE_CREDENTIAL_FILE: the current one, and the next during a rotation).
	PreviewCredentials []string
	JobWSCap           int
	RateWS             int
	RateWSBurst        int
	RateToken          int
	RateTokBurst       int
	RateAuthFail       int
	RateAuthFailBurst  int
	// TrustedProxies: the peers whose X-Forwarded-For names the client (CELL_TRUSTED_PROXIES).
	TrustedProxies []netip.Prefix
	// HTTP bounds slow bodies, idle keep-alive connections and connections at once
	// (CELL_BODY_TIMEOUT, CELL_MIN_BODY_RATE, CELL_IDLE_TIMEOUT, CELL_MAX_CONNECTIONS).
	HTTP httpserve.Limits
}

func load() (settings, error) {
	l := &config.Loader{}
	s := settings{
		CellID:        l.String("CELL_ID", "", true),
		ListenAddr:    l.Addr("CELL_LISTEN_ADDR", "127.0.0.1:8081", false),
		DatabaseURL:   l.String("CELL_DATABASE_URL", "", true),
		DirectoryURL:  l.String("DIRECTORY_DATABASE_URL", "", true),
		AuthTTL:       l.PositiveDuration("CELL_DIRECTORY_CACHE_TTL", 10*time.Second),
		AuthMaxStale:  l.PositiveDuration("CELL_DIRECTORY_MAX_STALE", 5*time.Minute),
		ShutdownGrace: l.Duration("CELL_SHUTDOWN_GRACE", 10*time.Second),
		IdemRetention: l.Duration("CELL_IDEMPOTENCY_RETENTION", 24*time.Hour),
		BlobURL:       l.String("CELL_BLOB_URL", "", true),
		LogLevel:      l.LogLevel(),
		JobSlots:      l.Int("CELL_JOB_SLOTS", 4, 1, 64),
		JobLease:      l.PositiveDuration("CELL_JOB_LEASE", 30*time.Second),
		CompileSlots:  l.Int("CELL_COMPILE_SLOTS", 2, 1, 16),
		JobWSCap:      l.Int("CELL_JOB_WORKSPACE_CONCURRENCY", 2, 0, 64),
		RateWS:        l.Int("CELL_RATE_WORKSPACE", 200, 0, 1_000_000),
		RateWSBurst:   l.Int("CELL_RATE_WORKSPACE_BURST", 400, 1, 10_000_000),
		RateToken:     l.Int("CELL_RATE_TOKEN", 100, 0, 1_000_000),
		RateTokBurst:  l.Int("CELL_RATE_TOKEN_BURST", 200, 1, 10_000_000),

		RateAuthFail:      l.Int("CELL_RATE_AUTH_FAILURES", 10, 0, 1_000_000),
		RateAuthFailBurst: l.Int("CELL_RATE_AUTH_FAILURES_BURST", 50, 1, 10_000_000),
	}
	s.InternalTLSAddr = l.Addr("CELL_INTERNAL_TLS_LISTEN_ADDR", "", false)
	s.TLSCertFile, s.TLSKeyFile = l.String("CELL_TLS_CERT_FILE", "", false), l.String("CELL_TLS_KEY_FILE", "", false)
	if (s.InternalTLSAddr != "") != (s.TLSCertFile != "") || (s.TLSCertFile != "") != (s.TLSKeyFile != "") {
		l.Fail("CELL_INTERNAL_TLS_LISTEN_ADDR", "CELL_INTERNAL_TLS_LISTEN_ADDR, CELL_TLS_CERT_FILE and CELL_TLS_KEY_FILE go together")
	}
	s.TrustedProxies = trustedProxies(l)
	s.HTTP = httpserve.Limits{
		BodyTimeout: l.PositiveDuration("CELL_BODY_TIMEOUT", 30*time.Second),
		MinBodyRate: int64(l.Int("CELL_MIN_BODY_RATE", 4<<10, 1024, 1<<30)),
		IdleTimeout: l.PositiveDuration("CELL_IDLE_TIMEOUT", 120*time.Second),
		MaxConns:    l.Int("CELL_MAX_CONNECTIONS", 4096, 16, 1_000_000),
	}
	if s.BlobURL != "" && !strings.HasPrefix(s.BlobURL, "file://") && !strings.HasPrefix(s.BlobURL, "s3://") && !strings.HasPrefix(s.BlobURL, "mem://") {
		l.Fail("CELL_BLOB_URL", "use file:///path, s3://bucket or mem://")
	}
	fp, err := failpoint.Parse(l.String("CELL_FAILPOINTS", "", false))
	if err != nil {
		l.Fail("CELL_FAILPOINTS", "%v", err)
	}
	s.Failpoints = fp
	s.BenchNoIdem = l.String("CELL_BENCH_IDEMPOTENCY_OFF", "", false) == "1"
	if s.BenchNoIdem && !strings.HasPrefix(s.CellID, "bench-") {
		l.Fail("CELL_BENCH_IDEMPOTENCY_OFF", "only benchmark cells (CELL_ID bench-…) may run without the idempotency layer")
	}
	if s.IdemRetention < 24*time.Hour {
		l.Fail("CELL_IDEMPOTENCY_RETENTION", "must be at least 24h")
	}
	if p := l.String("RENDER_TICKET_SIGNING_KEY_FILE", "", false); p != "" {
		b, err := os.ReadFile(p)
		if err == nil {
			s.TicketSigner, err = ticket.ParseSigner(strings.TrimSpace(string(b)))
		}
		if err != nil {
			l.Fail("RENDER_TICKET_SIGNING_KEY_FILE", "unreadable or not a signing key (kid:base64 of the Ed25519 seed, as `renderer keygen` prints it)")
		}
	}
	s.Render = render.Load(l, nil, s.TicketSigner)
	s.Retention = render.LoadRetention(l)
	if pub := l.String("CELL_PUBLIC_URL", "", false); pub != "" {
		u, err := url.Parse(pub)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" {
			l.Fail("CELL_PUBLIC_URL", "must be the router's public http(s) base URL")
		} else {
			s.PublicURL = u
		}
	}
	s.RenderWait = l.PositiveDuration("CELL_RENDER_WAIT", authoring.DefaultRenderWait)
	if s.RenderWait > 25*time.Second {
		l.Fail("CELL_RENDER_WAIT", "at most 25s: it must stay below the router's wait for a cell's answer (ROUTER_CELL_TIMEOUT, 30s)")
	}
	s.PreviewTTL = l.PositiveDuration("CELL_PREVIEW_TTL", 15*time.Minute)
	if s.PreviewTTL > 24*time.Hour {
		l.Fail("CELL_PREVIEW_TTL", "at most 24h: preview URLs are short-lived")
	}
	s.PreviewCredentials = l.Credentials("PREVIEW_SERVICE_CREDENTIAL_FILE", false)
	if s.PreviewCredentials != nil && s.TicketSigner == nil {
		l.Fail("RENDER_TICKET_SIGNING_KEY_FILE", "required with PREVIEW_SERVICE_CREDENTIAL_FILE: its public key verifies preview access")
	}
	if s.CellID != "" && !ids.CellIDValid(s.CellID) {
		l.Fail("CELL_ID", "%q: use 1-32 of a-z, 0-9 and '-', starting with a letter", s.CellID)
	}
	if s.AuthMaxStale < s.AuthTTL {
		l.Fail("CELL_DIRECTORY_MAX_STALE", "must be at least CELL_DIRECTORY_CACHE_TTL")
	}
	return s, l.Err()
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "cell:", logging.Redact(err.Error()))
		os.Exit(1)
	}
}

func run() error {
	s, err := load()
	if err != nil {
		return err
	}
	log, err := logging.NewWith("cell", logging.Options{Level: s.LogLevel})
	if err != nil {
		return err
	}
	log = log.With(zap.String("cell", s.CellID))
	defer func() { _ = log.Sync() }()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	stopTracing, err := tracing.ForProcess(ctx, "cell", log, tracing.Str(tracing.AttrCell, s.CellID))
	if err != nil {
		return err
	}
	defer stopTracing()

	cellDB, err := db.Open(ctx, s.DatabaseURL, db.Options{ApplicationName: "cell-" + s.CellID, MaxConns: 32, IdleInTransaction: idempotency.DefaultTimeout + time.Minute})
	if err != nil {
		return fmt.Errorf("cell database: %w", err)
	}
	defer cellDB.Close()
	if err := db.Migrate(s.DatabaseURL, migrations.FS, migrations.Cell, cellDB.Cockroach); err != nil {
		return err
	}
	dir, err := directory.Connect(ctx, s.DirectoryURL)
	if err != nil {
		return fmt.Errorf("directory database: %w", err)
	}
	defer dir.Close()

	bucket, err := openBucket(ctx, s.BlobURL)
	if err != nil {
		return fmt.Errorf("CELL_BLOB_URL: %w", err)
	}
	defer bucket.Close()
	cachedDir := directory.NewCached(dir, directory.CacheOptions{TTL: s.AuthTTL, MaxStale: s.AuthMaxStale})
	var coordinator *render.Coordinator
	if s.Render != nil {
		coordinator = render.New(*s.Render, cellDB, bucket, log.Named("render"))
		coordinator.Permitted = api.RenderOwnerPermitted(cachedDir)
		coordinator.Start(ctx)
		defer coordinator.Stop()
	}
	// Retention runs whether or not renderers are configured: preview-artifact snapshots are
	// made without them.
	retention := render.NewRetention(s.Retention, cellDB, bucket, log.Named("render-retention"))
	go retention.Run(ctx)
	var previewBackend http.Handler
	if len(s.PreviewCredentials) > 0 {
		signer := s.TicketSigner
		previewBackend = preview.NewBackend(preview.BackendConfig{Bucket: bucket, Credentials: s.PreviewCredentials,
			Keys: func() []ticket.PublicKey { return []ticket.PublicKey{signer.PublicKey()} }})
	}
	var failpoint func(string) error
	if len(s.Failpoints) > 0 {
		log.Warn("failpoints set: for fault tests only", zap.Any("failpoints", s.Failpoints))
		failpoint = s.Failpoints.Hit
	}
	services, err := cell.New(cell.Config{DB: cellDB, Blobs: bucket, Renderer: coordinator,
		PublicURL: s.PublicURL, TicketSigner: s.TicketSigner, PreviewTTL: s.PreviewTTL, RenderWait: s.RenderWait,
		IdempotencyRetention: s.IdemRetention, CompileSlots: s.CompileSlots, Failpoint: failpoint})
	if err != nil {
		return err
	}
	srv := api.New(api.Config{
		CellID: s.CellID, DB: cellDB, Log: log, Services: services, Renderer: coordinator, Collectors: retention.Collectors(), Blobs: bucket,
		BenchWithoutIdempotency: s.BenchNoIdem, PreviewBackend: previewBackend,
		RateWorkspace:           ratelimit.Limit{Rate: float64(s.RateWS), Burst: s.RateWSBurst},
		RateToken:               ratelimit.Limit{Rate: float64(s.RateToken), Burst: s.RateTokBurst},
		RateAuthFailures:        ratelimit.Limit{Rate: float64(s.RateAuthFail), Burst: s.RateAuthFailBurst},
		TrustedProxies:          s.TrustedProxies,
		JobWorkspaceConcurrency: s.JobWSCap,
		Dir:                     cachedDir,
	})
	housekeeping := maintenance.New(maintenance.Config{
		Idempotency: services.Idem, Temps: services.Blobs, Log: log,
	})
	go housekeeping.Run(ctx)
	workers := srv.Workers(s.JobSlots, s.JobLease)
	workersDone := make(chan struct{})
	go func() { _ = workers.Run(ctx); close(workersDone) }()
	defer func() { <-workersDone }() // running jobs finish or return to the queue
	ln, err := net.Listen("tcp", s.ListenAddr)
	if err != nil {
		return fmt.Errorf("CELL_LISTEN_ADDR: %w", err)
	}
	log.Info("listening", zap.String("addr", ln.Addr().String()))
	defer log.Info("stopped")
	// The body-rate rule is the router's (httpserve.BodyRate), so a body the router lets through
	// at its rate reaches the cell at the same rate and passes here too.
	if s.InternalTLSAddr == "" {
		return httpserve.RunLimited(ctx, ln, srv.Handler(), s.ShutdownGrace, s.HTTP)
	}
	cert, err := tls.LoadX509KeyPair(s.TLSCertFile, s.TLSKeyFile)
	if err != nil {
		return fmt.Errorf("CELL_TLS_CERT_FILE, CELL_TLS_KEY_FILE: %w", err)
	}
	tln, err := net.Listen("tcp", s.InternalTLSAddr)
	if err != nil {
		return fmt.Errorf("CELL_INTERNAL_TLS_LISTEN_ADDR: %w", err)
	}
	log.Info("listening (TLS)", zap.String("addr", tln.Addr().String()))
	return serveWithTLS(ctx, ln, tln, cert, srv.Handler(), s.ShutdownGrace, s.HTTP)
}

// serveWithTLS serves h on ln, and over TLS with cert on tln (the internal listener). Both end
// together: the first to stop (shutdown or failure) stops the other. Both apply lim.
func serveWithTLS(ctx context.Context, ln, tln net.Listener, cert tls.Certificate, h http.Handler, grace time.Duration, lim httpserve.Limits) error {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	tlsDone := make(chan error, 1)
	go func() {
		defer cancel()
		tlsDone <- httpserve.RunLimited(sctx, tls.NewListener(tln, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}), h, grace, lim)
	}()
	err := httpserve.RunLimited(sctx, ln, h, grace, lim)
	cancel()
	return errors.Join(err, <-tlsDone)
}

// trustedProxies reads CELL_TRUSTED_PROXIES: comma-separated networks (CIDR) or addresses,
// "none" for none; unset, api.DefaultTrustedProxies (loopback and private networks).
func trustedProxies(l *config.Loader) []netip.Prefix {
	v := strings.TrimSpace(l.String("CELL_TRUSTED_PROXIES", "", false))
	switch v {
	case "":
		return api.DefaultTrustedProxies
	case "none":
		return nil
	}
	var out []netip.Prefix
	for _, f := range strings.Split(v, ",") {
		f = strings.TrimSpace(f)
		p, err := netip.ParsePrefix(f)
		if err != nil {
			a, aerr := netip.ParseAddr(f)
			if aerr != nil {
				l.Fail("CELL_TRUSTED_PROXIES", "%q is neither a network (CIDR) nor an address; use a comma-separated list, or none", f)
				continue
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		out = append(out, p.Masked())
	}
	return out
}

// openBucket opens the blob store; a local folder is created when missing.
func openBucket(ctx context.Context, u string) (*blob.Bucket, error) {
	if strings.HasPrefix(u, "file://") {
		dir := strings.TrimPrefix(u, "file://")
		if i := strings.IndexByte(dir, '?'); i >= 0 {
			dir = dir[:i]
		}
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return nil, err
		}
	}
	return blob.OpenBucket(ctx, u)
}
