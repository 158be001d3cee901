// Command preview runs a cell's preview host: preview documents built from render snapshots,
// on its own listener and origin (never the API's), with the runtime that implements
// render-ready.v1. It pulls snapshots and the published key set from its cell's internal
// interface (/internal/preview/v1) with the preview service credential.
//
//	preview                                  serve (configuration from the environment, README.md)
//	preview build-runtime -src DIR -out DIR  bundle the runtime (make build runs it)
package main

import (
	"context"
	"crypto/x509"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"

	"slidecells/cell/preview"
	"slidecells/shared/config"
	"slidecells/shared/httpserve"
	"slidecells/shared/logging"
	"slidecells/shared/tracing"
)

type settings struct {
	ListenAddr string
	BackendURL string
	Credential string
	// BackendCA are the only CAs trusted for the backend's TLS (PREVIEW_BACKEND_CA_FILE).
	BackendCA     *x509.CertPool
	RuntimeDir    string
	Bases         preview.BaseConfig
	PlatformDir   string
	CacheMB       int
	KeyRefresh    time.Duration
	Timeout       time.Duration
	ShutdownGrace time.Duration
	LogLevel      string
}

func load() (settings, error) {
	l := &config.Loader{}
	s := settings{
		ListenAddr:    l.Addr("PREVIEW_LISTEN_ADDR", "127.0.0.1:8090", false),
		BackendURL:    l.String("PREVIEW_BACKEND_URL", "", true),
		RuntimeDir:    l.String("PREVIEW_RUNTIME_DIR", defaultRuntimeDir(), false),
		PlatformDir:   l.String("PREVIEW_PLATFORM_ASSET_DIR", "", false),
		CacheMB:       l.Int("PREVIEW_OBJECT_CACHE_MB", 64, 1, 4096),
		KeyRefresh:    l.PositiveDuration("PREVIEW_KEY_REFRESH", 5*time.Minute),
		Timeout:       l.PositiveDuration("PREVIEW_BACKEND_TIMEOUT", 10*time.Second),
		ShutdownGrace: l.Duration("PREVIEW_SHUTDOWN_GRACE", 10*time.Second),
		LogLevel:      l.LogLevel(),
		Bases: preview.BaseConfig{
			RuntimeAssetBase:  l.String("RENDER_RUNTIME_ASSET_BASE_URL", "", false),
			PlatformAssetBase: l.String("RENDER_PLATFORM_ASSET_BASE_URL", "", false),
		},
	}
	if s.BackendURL != "" {
		if err := preview.CheckBase(s.BackendURL); err != nil {
			l.Fail("PREVIEW_BACKEND_URL", "%v", err)
		}
	}
	for name, v := range map[string]string{"RENDER_RUNTIME_ASSET_BASE_URL": s.Bases.RuntimeAssetBase, "RENDER_PLATFORM_ASSET_BASE_URL": s.Bases.PlatformAssetBase} {
		if v != "" {
			if err := preview.CheckBase(v); err != nil {
				l.Fail(name, "%v", err)
			}
		}
	}
	if s.BackendCA = l.CAFile("PREVIEW_BACKEND_CA_FILE"); s.BackendCA != nil && !strings.HasPrefix(s.BackendURL, "https://") {
		l.Fail("PREVIEW_BACKEND_URL", "must be https when PREVIEW_BACKEND_CA_FILE is set: the service credential never crosses in clear")
	}
	if creds := l.Credentials("PREVIEW_SERVICE_CREDENTIAL_FILE", true); creds != nil {
		s.Credential = creds[0]
	}
	if s.PlatformDir != "" {
		if st, err := os.Stat(s.PlatformDir); err != nil || !st.IsDir() {
			l.Fail("PREVIEW_PLATFORM_ASSET_DIR", "%q is not a directory", s.PlatformDir)
		}
	}
	return s, l.Err()
}

// defaultRuntimeDir is preview-runtime next to the binary, where make build puts it.
func defaultRuntimeDir() string {
	exe, err := os.Executable()
	if err != nil {
		return "preview-runtime"
	}
	return filepath.Join(filepath.Dir(exe), "preview-runtime")
}

func main() {
	var err error
	if len(os.Args) > 1 && os.Args[1] == "build-runtime" {
		err = buildRuntime(os.Args[2:])
	} else if len(os.Args) > 1 {
		err = fmt.Errorf("unknown command %q (use no argument to serve, or build-runtime)", os.Args[1])
	} else {
		err = run()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "preview:", logging.Redact(err.Error()))
		os.Exit(1)
	}
}

func buildRuntime(args []string) error {
	fs := flag.NewFlagSet("build-runtime", flag.ContinueOnError)
	src := fs.String("src", "cell/preview/runtime", "the runtime's sources, with node_modules installed (npm ci)")
	out := fs.String("out", defaultRuntimeDir(), "where to write the runtime (PREVIEW_RUNTIME_DIR)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	return preview.BuildRuntime(*src, *out)
}

func run() error {
	s, err := load()
	if err != nil {
		return err
	}
	rt, err := preview.LoadRuntime(s.RuntimeDir)
	if err != nil {
		return fmt.Errorf("PREVIEW_RUNTIME_DIR: %w", err)
	}
	log, err := logging.NewWith("preview", logging.Options{Level: s.LogLevel})
	if err != nil {
		return err
	}
	defer func() { _ = log.Sync() }()
	puller, err := preview.NewPuller(preview.PullerOptions{
		BackendURL: s.BackendURL, Credential: s.Credential, Timeout: s.Timeout,
		CacheBytes: int64(s.CacheMB) << 20, KeyRefresh: s.KeyRefresh, RootCAs: s.BackendCA,
	})
	if err != nil {
		return err
	}
	host, err := preview.New(preview.Options{Puller: puller, Runtime: rt, Bases: s.Bases, PlatformDir: s.PlatformDir, Log: log})
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	stopTracing, err := tracing.ForProcess(ctx, "preview", log)
	if err != nil {
		return err
	}
	defer stopTracing()
	ln, err := net.Listen("tcp", s.ListenAddr)
	if err != nil {
		return fmt.Errorf("PREVIEW_LISTEN_ADDR: %w", err)
	}
	log.Info("listening", zap.String("addr", ln.Addr().String()), zap.String("host_build", preview.HostBuild),
		zap.String("runtime_version", rt.Version))
	defer log.Info("stopped")
	return httpserve.Run(ctx, ln, host.Handler(), s.ShutdownGrace)
}
