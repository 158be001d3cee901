package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.uber.org/zap"

	"slidecells/renderer"
	"slidecells/renderer/chromium"
	"slidecells/renderer/supervisor"
	"slidecells/shared/logging"
	"slidecells/shared/ticket"
)

func main() {
	// Must come first: the supervisor starts children through this
	// binary as an exec shim.
	supervisor.RunShimIfRequested()
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "child":
			os.Exit(chromium.RunChild(os.Stdin, os.Stdout, os.Stderr))
		case "keygen":
			os.Exit(keygen(os.Args[2:]))
		default:
			fmt.Fprintf(os.Stderr, "usage: renderer            (serve; configured by RENDER_* variables)\n       renderer keygen <kid>\n")
			os.Exit(2)
		}
	}
	os.Exit(serve())
}

func keygen(args []string) int {
	if len(args) != 1 {
		fmt.Fprintln(os.Stderr, "usage: renderer keygen <kid>")
		return 2
	}
	s, err := ticket.GenerateSigner(args[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("# public key, for RENDER_TICKET_PUBLIC_KEYS (comma-separate several during rotation)\n%s\n", s.PublicKey())
	fmt.Printf("# private key, for the signer's secret store only\n%s\n", s.EncodePrivate())
	return 0
}

func serve() int {
	log, err := logging.New("renderer")
	if err != nil {
		fmt.Fprintln(os.Stderr, "renderer:", err)
		return 2
	}
	defer func() { _ = log.Sync() }()
	cfg, err := renderer.LoadConfig(os.Getenv, os.Environ())
	if err != nil {
		log.Error("invalid configuration", zap.Error(err))
		fmt.Fprintln(os.Stderr, "renderer: invalid configuration:", err)
		return 2
	}
	self, err := os.Executable()
	if err != nil {
		log.Error("own executable unknown", zap.Error(err))
		return 2
	}
	cfg.ChildCommand = []string{self, "child"}
	if v := os.Getenv("LOG_LEVEL"); v != "" {
		cfg.ChildExtraEnv = append(cfg.ChildExtraEnv, "LOG_LEVEL="+v)
	}
	if err := supervisor.BecomeSubreaper(); err != nil {
		log.Error("cannot become the reaper of browser helpers", zap.Error(err))
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	profile, err := renderer.ComputeProfile(ctx, &cfg)
	if err != nil {
		log.Error("render profile", zap.Error(err))
		fmt.Fprintln(os.Stderr, "renderer:", err)
		return 2
	}
	srv, err := renderer.New(cfg, profile, log)
	if err != nil {
		log.Error("start", zap.Error(err))
		fmt.Fprintln(os.Stderr, "renderer:", err)
		return 2
	}
	ln, err := net.Listen("tcp", cfg.ListenAddr)
	if err != nil {
		log.Error("listen", zap.String("setting", "RENDER_LISTEN_ADDR"), zap.Error(err))
		return 2
	}
	httpSrv := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute}
	log.Info("renderer listening", zap.String("addr", ln.Addr().String()), zap.String("worker_id", cfg.WorkerID),
		zap.String("epoch", srv.Epoch()), zap.String("environment_digest", srv.EnvironmentDigest()),
		zap.String("child_uid_range", fmt.Sprintf("%d-%d", cfg.ChildUIDs.First, cfg.ChildUIDs.Last)),
		zap.Bool("tls", cfg.TLSCertFile != ""))
	serveErr := make(chan error, 1)
	go func() {
		if cfg.TLSCertFile != "" {
			serveErr <- httpSrv.ServeTLS(ln, cfg.TLSCertFile, cfg.TLSKeyFile)
			return
		}
		serveErr <- httpSrv.Serve(ln)
	}()

	select {
	case <-ctx.Done():
	case err := <-serveErr:
		log.Error("http server stopped", zap.Error(err))
	}
	stop()
	// Stop accepting, stop the running attempt, prove its process group
	// gone; queries keep working while that happens.
	log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), cfg.CleanupGrace+supervisor.DefaultProofTimeout+5*time.Second)
	defer cancel()
	code := 0
	if err := srv.Shutdown(sctx); err != nil {
		log.Error("attempt resources not proven released before exit", zap.Error(err))
		code = 1
	}
	hctx, hcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer hcancel()
	if err := httpSrv.Shutdown(hctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Warn("http shutdown", zap.Error(err))
	}
	log.Info("stopped")
	return code
}
