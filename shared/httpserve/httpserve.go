// Package httpserve is how a binary of the cell serves HTTP: one server configuration
// (header timeout and size, idle timeout), served until its context ends and then shut down
// gracefully, and the status recorder its access logs use.
package httpserve

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"
)

// Run serves h on ln until ctx ends or serving fails, then shuts the server down, letting
// requests in flight finish within grace.
func Run(ctx context.Context, ln net.Listener, h http.Handler, grace time.Duration) error {
	return serve(ctx, ln, &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		MaxHeaderBytes:    64 << 10,
		IdleTimeout:       120 * time.Second,
	}, grace)
}

// serve runs hs on ln until ctx ends or serving fails, then shuts it down within grace.
func serve(ctx context.Context, ln net.Listener, hs *http.Server, grace time.Duration) error {
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// StatusWriter remembers the status of the answer written through it.
type StatusWriter struct {
	http.ResponseWriter
	status int
}

// Status is the answer's status: 200 when the handler wrote nothing or only a body.
func (w *StatusWriter) Status() int {
	if w.status == 0 {
		return http.StatusOK
	}
	return w.status
}

// WriteHeader implements http.ResponseWriter.
func (w *StatusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

// Write implements http.ResponseWriter.
func (w *StatusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap gives http.ResponseController the writer underneath.
func (w *StatusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
