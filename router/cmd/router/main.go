package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"unique"

	"go.uber.org/zap"

	"slidecells/router"
	"slidecells/router/placement"
	"slidecells/shared/directory"
	"slidecells/shared/logging"
	"slidecells/shared/tracing"
)

func main() {
	s, err := loadSettings(os.Getenv)
	// Buffered: one access-log line per request must not cost one write per request. Every exit
	// path below syncs, so nothing is lost on a normal stop. A bad LOG_LEVEL leaves "info" here
	// and is reported with the other bad settings.
	log, access, lerr := logging.NewWithAccess("router", logging.Options{Buffered: true, Level: s.LogLevel})
	if lerr != nil {
		fmt.Fprintln(os.Stderr, "router:", lerr)
		os.Exit(2)
	}
	os.Exit(mainCode(log, access, s, err))
}

func mainCode(log *zap.Logger, access *logging.AccessLog, s settings, err error) int {
	defer func() { _ = log.Sync() }()
	ml := router.TuneRuntime()
	if ml.Err != nil {
		log.Warn("no soft memory limit: the container's memory limit could not be read", zap.Error(ml.Err))
	}
	log.Info("runtime", zap.String("memory_limit_source", ml.Source), zap.Int64("memory_limit_bytes", ml.Bytes),
		zap.Int("gomaxprocs", runtime.GOMAXPROCS(0)))
	if err != nil {
		log.Error("router: "+err.Error(), zap.String("event", "config"))
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	stopTracing, err := tracing.ForProcess(ctx, "router", log)
	if err != nil {
		log.Error("router: "+err.Error(), zap.String("event", "config"))
		return 2
	}
	defer stopTracing()
	if err := run(ctx, s, log, access); err != nil {
		log.Error("router stopped", zap.Error(err))
		return 1
	}
	return 0
}

// run serves until ctx ends, then shuts down gracefully.
func run(ctx context.Context, s settings, log *zap.Logger, access *logging.AccessLog) error {
	dir, err := directory.Connect(ctx, s.DirectoryURL)
	if err != nil {
		return fmt.Errorf("directory: %w", err)
	}
	defer dir.Close()

	cfg := s.Router
	src := directorySource{dir}
	cfg.Placements, cfg.Cells, cfg.Logger, cfg.AccessLog = src, src, log, access
	if s.UnknownHashKeyDerived {
		log.Info("ROUTER_UNKNOWN_HASH_KEY is not set; deriving it from the directory URL (set it explicitly when replicas use different URLs)")
	}
	rt, err := router.New(ctx, cfg)
	if err != nil {
		return err
	}
	defer rt.Close()

	failed := make(chan error, 2)
	s.Server.ErrorLog = zap.NewStdLog(log.Named("public"))
	internal, err := serve(s.InternalAddr, router.NewInternalServer(rt.OpsHandler(), zap.NewStdLog(log.Named("internal"))), "internal", log, failed)
	if err != nil {
		return err
	}
	publicSrv := router.NewPublicServer(rt.Handler(), s.Server)
	rt.ObservePublic(publicSrv)
	public, err := serve(s.ListenAddr, publicSrv, "public", log, failed)
	if err != nil {
		_ = internal.Close()
		return err
	}
	// The public listener stops first, so probes see the router until it is gone.
	servers := []server{public, internal}

	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-failed:
	}
	log.Info("shutting down", zap.Duration("timeout", s.ShutdownTimeout))
	sctx, cancel := context.WithTimeout(context.Background(), s.ShutdownTimeout)
	defer cancel()
	var errs []error
	for _, srv := range servers {
		errs = append(errs, srv.Shutdown(sctx))
	}
	return errors.Join(append(errs, serveErr)...)
}

// server is what the public (router/h1) and the internal (net/http) servers have in common.
type server interface {
	Serve(net.Listener) error
	Shutdown(context.Context) error
	Close() error
}

// serve listens on addr and serves srv in the background; it logs the address actually bound
// (addr may name port 0) and reports a failure to serve on failed.
func serve[S server](addr string, srv S, name string, log *zap.Logger, failed chan<- error) (S, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return srv, fmt.Errorf("%s listener: %w", name, err)
	}
	log.Info("listening", zap.String("listener", name), zap.String("addr", ln.Addr().String()))
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			failed <- fmt.Errorf("%s listener: %w", name, err)
		}
	}()
	return srv, nil
}

// directorySource adapts the directory database to what the router reads.
type directorySource struct{ d *directory.Directory }

func (s directorySource) Placement(ctx context.Context, ws string) (placement.Placement, error) {
	p, err := s.d.Placement(ctx, ws)
	switch {
	case errors.Is(err, directory.ErrNotFound):
		return placement.Placement{}, placement.ErrNotFound
	case err != nil:
		return placement.Placement{}, err
	}
	// Interned: a cache of 100,000 placements holds a handful of distinct cell IDs, not 100,000
	// copies of them.
	return placement.Placement{CellID: unique.Make(p.CellID).Value(), Epoch: p.Epoch}, nil
}

func (s directorySource) Cells(ctx context.Context) ([]router.Cell, error) {
	list, err := s.d.Cells(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]router.Cell, len(list))
	for i, c := range list {
		out[i] = router.Cell{ID: c.ID, URL: c.InternalURL, State: router.CellState(c.State), PreviewURL: c.PreviewURL}
	}
	return out, nil
}
