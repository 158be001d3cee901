package httpserve

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/netutil"
)

// Limits bounds what slow or idle clients can hold (issue #27.3). The zero value of a field
// takes its default.
type Limits struct {
	// BodyTimeout is the time a request body may take beyond what MinBodyRate allows for its
	// declared length (default 30 s): a body is read within BodyTimeout + length/MinBodyRate of
	// its headers, or its reads fail with a timeout (the handler answers 408) and the connection
	// is closed.
	BodyTimeout time.Duration
	// MinBodyRate is the slowest transfer allowed for a body's declared length, in bytes per
	// second (default 64 KiB/s). A chunked body of unknown length gets MaxBodyBytes/MinBodyRate.
	MinBodyRate int64
	// MaxBodyBytes is the largest body any route accepts (default 25 MiB); it sizes the deadline
	// of a body without a declared length.
	MaxBodyBytes int64
	// IdleTimeout closes a keep-alive connection idle for longer (default 120 s).
	IdleTimeout time.Duration
	// MaxConns caps the connections served at once (default 4096); further connections wait in
	// the listen backlog until one closes.
	MaxConns int
}

func (l Limits) withDefaults() Limits {
	if l.BodyTimeout <= 0 {
		l.BodyTimeout = 30 * time.Second
	}
	if l.MinBodyRate <= 0 {
		l.MinBodyRate = 64 << 10
	}
	if l.MaxBodyBytes <= 0 {
		l.MaxBodyBytes = 25 << 20
	}
	if l.IdleTimeout <= 0 {
		l.IdleTimeout = 120 * time.Second
	}
	if l.MaxConns <= 0 {
		l.MaxConns = 4096
	}
	return l
}

// RunLimited is Run with Limits: slow bodies time out (see BoundBodies), idle keep-alive
// connections close after IdleTimeout, and at most MaxConns connections are served at once.
func RunLimited(ctx context.Context, ln net.Listener, h http.Handler, grace time.Duration, lim Limits) error {
	lim = lim.withDefaults()
	return serve(ctx, netutil.LimitListener(ln, lim.MaxConns), &http.Server{
		Handler:           BoundBodies(h, lim),
		ReadHeaderTimeout: 10 * time.Second,
		MaxHeaderBytes:    64 << 10,
		IdleTimeout:       lim.IdleTimeout,
	}, grace)
}

// BodyDeadline is the time a body of declared length n (-1: unknown) may take under lim.
func (l Limits) BodyDeadline(n int64) time.Duration {
	l = l.withDefaults()
	if n < 0 {
		n = l.MaxBodyBytes
	}
	return l.BodyTimeout + time.Duration(float64(n)/float64(l.MinBodyRate)*float64(time.Second))
}

// BoundBodies sets a read deadline on every request that has a body (BodyDeadline of its
// declared length), so that a client that declares more than it sends cannot hold the
// connection: the handler's reads then fail with a timeout (answer 408), and the connection
// is closed. An answer written before the body was read to its end says Connection: close,
// so the server does not wait for the rest of the body either.
func BoundBodies(h http.Handler, lim Limits) http.Handler {
	lim = lim.withDefaults()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
			h.ServeHTTP(w, r)
			return
		}
		rc := http.NewResponseController(w)
		_ = rc.SetReadDeadline(time.Now().Add(lim.BodyDeadline(r.ContentLength)))
		b := &trackedBody{ReadCloser: r.Body}
		r.Body = b
		bw := &closeUnread{ResponseWriter: w, body: b}
		h.ServeHTTP(bw, r)
		bw.ensureHeader()
	})
}

// trackedBody remembers whether its body was read to its end.
type trackedBody struct {
	io.ReadCloser
	eof atomic.Bool
}

func (b *trackedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if errors.Is(err, io.EOF) {
		b.eof.Store(true)
	}
	return n, err
}

// closeUnread adds Connection: close to an answer whose request body was not read to its end.
type closeUnread struct {
	http.ResponseWriter
	body *trackedBody
	once sync.Once
}

func (w *closeUnread) ensureHeader() {
	w.once.Do(func() {
		if !w.body.eof.Load() {
			w.ResponseWriter.Header().Set("Connection", "close")
		}
	})
}

func (w *closeUnread) WriteHeader(code int) {
	w.ensureHeader()
	w.ResponseWriter.WriteHeader(code)
}

func (w *closeUnread) Write(p []byte) (int, error) {
	w.ensureHeader()
	return w.ResponseWriter.Write(p)
}

// Unwrap gives http.ResponseController the writer underneath.
func (w *closeUnread) Unwrap() http.ResponseWriter { return w.ResponseWriter }
