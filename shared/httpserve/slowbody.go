package httpserve

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/netutil"
)

// Limits bounds what slow or idle clients can hold (issue #27.3). The zero value of a field
// takes its default.
type Limits struct {
	// BodyTimeout is the grace a request body gets before MinBodyRate applies (default 30 s).
	BodyTimeout time.Duration
	// MinBodyRate is the slowest average, in bytes per second, at which a body may arrive after
	// the grace (default 4 KiB/s): see BodyRate.
	MinBodyRate int64
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
		l.MinBodyRate = 4 << 10
	}
	if l.IdleTimeout <= 0 {
		l.IdleTimeout = 120 * time.Second
	}
	if l.MaxConns <= 0 {
		l.MaxConns = 4096
	}
	return l
}

// RunLimited is Run with Limits: slow bodies are cut (see BoundBodies), idle keep-alive
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

// BodyRate is the body-rate rule the router and the cell share: the n-th byte of a request
// body must have arrived by start + Grace + n/MinRate. A client that declares 1,000 bytes and
// sends 8 holds its connection for about Grace, not forever, while a large upload on a good
// link is never cut (there is no fixed deadline for the whole body).
type BodyRate struct {
	Grace   time.Duration
	MinRate int64 // bytes per second, > 0
}

// Guard puts the rule on r's body and returns its guard; nil when r has no body. The handler
// reads r.Body as usual: a read that falls behind the rule fails with an error wrapping
// os.ErrDeadlineExceeded (answer 408), and the guard's Slow says so afterwards.
func (br BodyRate) Guard(w http.ResponseWriter, r *http.Request) *BodyGuard {
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return nil
	}
	g := &BodyGuard{body: r.Body, rc: http.NewResponseController(w), start: time.Now(),
		grace: br.Grace, rate: br.MinRate}
	// The first deadline is set now, not at the first read: a handler that answers without
	// reading the body leaves the server to discard it, and that discard is bounded too.
	_ = g.rc.SetReadDeadline(g.start.Add(g.grace))
	r.Body = g
	return g
}

// BodyGuard enforces a BodyRate on one request body with the connection's read deadline,
// moved forward before every read. Once the body is read to its end the deadline is cleared:
// an expired deadline left behind would make the server's background read of the connection
// (which starts at the end of the body) cancel the request while its handler still works. A
// body closed before its end keeps its last deadline, which bounds the server's discard of the
// rest.
type BodyGuard struct {
	body     io.ReadCloser
	rc       *http.ResponseController
	start    time.Time
	grace    time.Duration
	rate     int64
	n        atomic.Int64 // bytes read; a transport may read on its own goroutine
	timedOut atomic.Bool
	eof      atomic.Bool
	cleared  atomic.Bool
}

// Read implements io.Reader under the rule.
func (g *BodyGuard) Read(p []byte) (int, error) {
	if g.cleared.Load() {
		k, err := g.body.Read(p)
		if errors.Is(err, io.EOF) {
			g.eof.Store(true)
		}
		return k, err
	}
	n := g.n.Load()
	_ = g.rc.SetReadDeadline(g.start.Add(g.grace + time.Duration(n)*time.Second/time.Duration(g.rate)))
	k, err := g.body.Read(p)
	g.n.Add(int64(k))
	switch {
	case err == nil:
	case errors.Is(err, os.ErrDeadlineExceeded):
		g.timedOut.Store(true)
	case errors.Is(err, io.EOF):
		g.eof.Store(true)
		g.clear()
	}
	return k, err
}

// Close implements io.Closer.
func (g *BodyGuard) Close() error { return g.body.Close() }

// Release ends the rule for a body the caller holds whole (it read exactly the declared
// length and will not read on): the deadline is cleared as at the end of the body.
func (g *BodyGuard) Release() {
	g.eof.Store(true)
	g.clear()
}

// Slow reports whether the rule cut the body; false for a nil guard (no body).
func (g *BodyGuard) Slow() bool { return g != nil && g.timedOut.Load() }

// Done reports whether the body was read to its end; true for a nil guard (no body).
func (g *BodyGuard) Done() bool { return g == nil || g.eof.Load() }

// clear removes the read deadline (once), unless the rule cut the body: that connection is
// done for.
func (g *BodyGuard) clear() {
	if g.cleared.CompareAndSwap(false, true) && !g.timedOut.Load() {
		_ = g.rc.SetReadDeadline(time.Time{})
	}
}

// BoundBodies puts the body-rate rule of lim (BodyTimeout as the grace, MinBodyRate) on every
// request that has a body, so that a client that declares more than it sends cannot hold the
// connection: the handler's reads then fail with a timeout (it answers 408) and the connection
// is closed. An answer written before the body was read to its end says Connection: close, so
// the server does not wait for the rest of the body either.
func BoundBodies(h http.Handler, lim Limits) http.Handler {
	lim = lim.withDefaults()
	rate := BodyRate{Grace: lim.BodyTimeout, MinRate: lim.MinBodyRate}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g := rate.Guard(w, r)
		if g == nil {
			h.ServeHTTP(w, r)
			return
		}
		bw := &closeUnread{ResponseWriter: w, body: g}
		h.ServeHTTP(bw, r)
		bw.ensureHeader()
	})
}

// closeUnread adds Connection: close to an answer whose request body was not read to its end.
type closeUnread struct {
	http.ResponseWriter
	body *BodyGuard
	once sync.Once
}

func (w *closeUnread) ensureHeader() {
	w.once.Do(func() {
		if !w.body.Done() {
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

// Flush passes a flush through, so that streamed answers still stream.
func (w *closeUnread) Flush() {
	w.ensureHeader()
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap gives http.ResponseController the writer underneath.
func (w *closeUnread) Unwrap() http.ResponseWriter { return w.ResponseWriter }
