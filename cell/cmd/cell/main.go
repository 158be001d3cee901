// Command cell runs one cell's backend: API v1 for the workspaces the cell hosts.
//
// Configuration is read from the environment (see README.md, "Configuration"); an invalid
// setting stops start-up with a message naming it.
package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
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

	"slidecells/cell/api"
	cblob "slidecells/cell/blob"
	"slidecells/migrations"
	"slidecells/shared/config"
	"slidecells/shared/db"
	"slidecells/shared/directory"
	"slidecells/shared/ids"
	"slidecells/shared/logging"
)

type settings struct {
	CellID        string
	ListenAddr    string
	DatabaseURL   string
	DirectoryURL  string
	AuthTTL       time.Duration
	AuthMaxStale  time.Duration
	ShutdownGrace time.Duration
	RendererURLs  []string
	// RendererCredential is the renderers' service credential: the first line of
	// RENDER_SERVICE_CREDENTIAL_FILE (during a rotation the renderers accept a second one).
	RendererCredential string
	IdemRetention      time.Duration
	BlobURL            string
}

func load() (settings, error) {
	l := &config.Loader{}
	s := settings{
		CellID:        l.String("CELL_ID", "", true),
		ListenAddr:    l.String("CELL_LISTEN_ADDR", "127.0.0.1:8081", false),
		DatabaseURL:   l.String("CELL_DATABASE_URL", "", true),
		DirectoryURL:  l.String("DIRECTORY_DATABASE_URL", "", true),
		AuthTTL:       l.Duration("CELL_DIRECTORY_CACHE_TTL", 10*time.Second),
		AuthMaxStale:  l.Duration("CELL_DIRECTORY_MAX_STALE", 5*time.Minute),
		ShutdownGrace: l.Duration("CELL_SHUTDOWN_GRACE", 10*time.Second),
		IdemRetention: l.Duration("CELL_IDEMPOTENCY_RETENTION", 24*time.Hour),
		BlobURL:       l.String("CELL_BLOB_URL", "", true),
	}
	if s.BlobURL != "" && !strings.HasPrefix(s.BlobURL, "file://") && !strings.HasPrefix(s.BlobURL, "s3://") && !strings.HasPrefix(s.BlobURL, "mem://") {
		l.Fail("CELL_BLOB_URL", "use file:///path, s3://bucket or mem://")
	}
	if s.IdemRetention < 24*time.Hour {
		l.Fail("CELL_IDEMPOTENCY_RETENTION", "must be at least 24h")
	}
	for _, u := range strings.Split(l.String("CELL_RENDERER_URLS", "", false), ",") {
		if u = strings.TrimSpace(u); u == "" {
			continue
		}
		if pu, err := url.Parse(u); err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" {
			l.Fail("CELL_RENDERER_URLS", "%q is not an http(s) base URL", u)
		}
		s.RendererURLs = append(s.RendererURLs, strings.TrimRight(u, "/"))
	}
	if p := l.String("RENDER_SERVICE_CREDENTIAL_FILE", "", false); p != "" {
		b, err := os.ReadFile(p)
		line, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
		if err != nil || len(strings.TrimSpace(line)) < 16 {
			l.Fail("RENDER_SERVICE_CREDENTIAL_FILE", "unreadable or shorter than 16 characters")
		}
		s.RendererCredential = strings.TrimSpace(line)
	} else if len(s.RendererURLs) > 0 {
		l.Fail("RENDER_SERVICE_CREDENTIAL_FILE", "required with CELL_RENDERER_URLS: the renderers' service credential")
	}
	if s.CellID != "" && !ids.CellIDValid(s.CellID) {
		l.Fail("CELL_ID", "%q: use 1-32 of a-z, 0-9 and '-', starting with a letter", s.CellID)
	}
	if _, _, err := net.SplitHostPort(s.ListenAddr); err != nil {
		l.Fail("CELL_LISTEN_ADDR", "%q is not host:port", s.ListenAddr)
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
	log, err := logging.New("cell")
	if err != nil {
		return err
	}
	log = log.With(zap.String("cell", s.CellID))
	defer func() { _ = log.Sync() }()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	cellDB, err := db.Open(ctx, s.DatabaseURL, db.Options{ApplicationName: "cell-" + s.CellID, MaxConns: 32})
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
	var render api.RenderHealth
	if len(s.RendererURLs) > 0 {
		render = api.ProbeRenderers(s.RendererURLs, s.RendererCredential)
	}
	srv := api.New(api.Config{
		CellID: s.CellID, DB: cellDB, Log: log, Render: render, IdempotencyRetention: s.IdemRetention, Blobs: bucket,
		Dir: directory.NewCached(dir, directory.CacheOptions{TTL: s.AuthTTL, MaxStale: s.AuthMaxStale}),
	})
	blobs := &cblob.Store{Bucket: bucket}
	go every(ctx, 10*time.Minute, func() {
		// Expired idempotency records, in batches.
		for {
			n, err := srv.Idem.Purge(ctx, 500)
			if err != nil {
				log.Warn("idempotency purge failed", zap.Error(err))
			}
			if err != nil || n < 500 {
				break
			}
		}
		// Upload temporaries left by a crash mid-upload.
		if n, err := blobs.SweepTemp(ctx, time.Now().Add(-time.Hour)); err != nil {
			log.Warn("temporary blob sweep failed", zap.Error(err))
		} else if n > 0 {
			log.Info("temporary blobs swept", zap.Int("count", n))
		}
	})
	ln, err := net.Listen("tcp", s.ListenAddr)
	if err != nil {
		return fmt.Errorf("CELL_LISTEN_ADDR: %w", err)
	}
	hs := &http.Server{
		Handler:           srv.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		MaxHeaderBytes:    64 << 10,
		IdleTimeout:       120 * time.Second,
	}
	log.Info("listening", zap.String("addr", ln.Addr().String()))
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), s.ShutdownGrace)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
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

// every runs fn every interval until ctx ends.
func every(ctx context.Context, interval time.Duration, fn func()) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			fn()
		}
	}
}
