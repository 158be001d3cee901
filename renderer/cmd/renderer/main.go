package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"

	"slidecells/renderer"
	"slidecells/renderer/chromium"
	"slidecells/renderer/supervisor"
	"slidecells/shared/logging"
	"slidecells/shared/ticket"
	"slidecells/shared/tracing"
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
		case "profile":
			os.Exit(profile(os.Args[2:], os.Stdout, os.Stderr))
		default:
			fmt.Fprint(os.Stderr, usage)
			os.Exit(2)
		}
	}
	os.Exit(serve())
}

const usage = `usage: renderer            (serve; configured by RENDER_* variables)
       renderer keygen <kid>
       renderer profile [--preview-host-build B] [--image-digest D]
`

// profile prints this instance's RenderProfile as JSON: what a release
// writes as RENDER_PROFILE_MANIFEST for its renderers and its cells. The
// preview host build and the image digest are release facts the renderer
// cannot compute; they come from flags (the renderer does not link the
// cell's code to learn the host build).
func profile(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("profile", flag.ContinueOnError)
	fs.SetOutput(stderr)
	hostBuild := fs.String("preview-host-build", "", "preview host build the release pins (the cell's preview.HostBuild); renderers then refuse documents of any other build. Empty pins none")
	image := fs.String("image-digest", "", "digest of the renderer image the release ships, if any")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	for name, v := range map[string]string{"--preview-host-build": *hostBuild, "--image-digest": *image} {
		if len(v) > 200 || strings.ContainsFunc(v, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
			fmt.Fprintf(stderr, "renderer profile: %s must be at most 200 printable characters without spaces\n", name)
			return 2
		}
	}
	cfg, err := renderer.LoadProfileConfig(os.Getenv, os.Environ())
	if err != nil {
		fmt.Fprintln(stderr, "renderer: invalid configuration:", err)
		return 2
	}
	p, err := renderer.ComputeProfile(context.Background(), &cfg)
	if err != nil {
		fmt.Fprintln(stderr, "renderer profile:", err)
		return 1
	}
	p.PreviewHostBuild, p.ImageDigest = *hostBuild, *image
	d, err := p.Digest()
	if err != nil {
		fmt.Fprintln(stderr, "renderer profile:", err)
		return 1
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(p); err != nil {
		return 1
	}
	fmt.Fprintf(stderr, "environment digest %s\n", d)
	return 0
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
	stopTracing, err := tracing.ForProcess(ctx, "renderer", log)
	if err != nil {
		log.Error("invalid configuration", zap.Error(err))
		fmt.Fprintln(os.Stderr, "renderer: invalid configuration:", err)
		return 2
	}
	defer stopTracing()
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
	stopMetrics, err := serveMetrics(cfg.MetricsAddr, srv.MetricsHandler(), serveErr, log)
	if err != nil {
		log.Error("listen", zap.String("setting", "RENDER_METRICS_ADDR"), zap.Error(err))
		return 2
	}
	defer stopMetrics()
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

// serveMetrics serves the monitoring listener (RENDER_METRICS_ADDR): GET /metrics without the
// service credential, nothing else. Unset, it serves nothing (/metrics stays on the control
// API, credentialed).
func serveMetrics(addr string, h http.Handler, serveErr chan<- error, log *zap.Logger) (func(), error) {
	if addr == "" {
		return func() {}, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	m := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute}
	log.Info("renderer metrics listening", zap.String("addr", ln.Addr().String()))
	go func() {
		if err := m.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			select {
			case serveErr <- err:
			default:
			}
		}
	}()
	return func() { _ = m.Close() }, nil
}
