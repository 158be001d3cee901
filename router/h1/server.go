// Package h1 is the router's public HTTP/1.1 server: a connection loop of its own for the
// requests that make up nearly all of the router's traffic, with net/http's server behind it
// for everything else.
//
// net/http's server costs the router about a quarter of its CPU per proxied request beyond the
// system calls: a request context and a background read (a goroutine, a poller wake-up and a
// read deadline change) per request, per-request deadlines, the response writer's layering
// (response, chunkWriter, two bufio.Writers) and textproto's parsing (BENCHMARKS.md, "Router").
// This loop reads a request head into the connection's buffer, checks it, and serves it on the
// connection's own goroutine with one http.Request, one Header map and one string holding every
// key and value; the handler (the router's httputil.ReverseProxy) is unchanged. On a socket,
// bodiless requests are served inside one syscall.RawConn.Read that lasts from request to
// request (serveRaw says why): between keep-alive requests the loop waits for readiness
// instead of first trying a read that fails with EAGAIN.
//
// What the loop takes ("plain" requests): HTTP/1.1, an origin-form target, one valid Host
// header, header names and values that net/http would accept, no body or one framed by a single
// Content-Length, no Transfer-Encoding, Upgrade, Expect, Trailer or Connection: upgrade, and a
// head within the connection's 4 KiB buffer. Anything else (HTTP/1.0 and HTTP/2 prefaces,
// chunked uploads, WebSocket upgrades, 100-continue, malformed or oversized heads) hands the
// connection, with the bytes already read, to a net/http server with the same handler and
// limits, which serves it for the rest of its life and answers malformed requests exactly as
// it always did (400, 431, 505).
//
// What differs from net/http on the requests the loop takes:
//   - Timeouts are enforced by one sweep per server every 200 ms (a head that is late, an idle
//     keep-alive connection) instead of a read deadline per request: they land up to 400 ms
//     late, never early.
//   - A client that hangs up while its request is served is noticed by that sweep (a
//     non-blocking MSG_PEEK on connections busy for more than one sweep), not by a read kept
//     pending on the connection: the request's context ends up to 400 ms after the hang-up.
//   - The request's context is the connection's: it ends when the client hangs up or the
//     connection closes, not when the handler returns.
//   - A client's end of input (a half-close) that arrives together with a request's last
//     bytes is seen by the sweep, so the connection closes (or the cut head is answered) up
//     to 400 ms later rather than at once (serveRaw).
//   - Hijacking is not offered (upgrades go to net/http): the writer is no http.Hijacker.
//   - What the handler left unread of a body is read off after the answer within
//     ReadHeaderTimeout (like the next head), not without a bound. Until then the body stays
//     readable: every request is full duplex, as after ResponseController.EnableFullDuplex
//     (which succeeds), where net/http by default reads off the rest of a body when the
//     answer's head goes out and a read after that fails (http.ErrBodyReadAfterClose). What
//     http.MaxBytesReader stopped a handler from reading is read off the same way and the
//     connection kept (net/http's writer has a hook for it, which only its own server can
//     offer, that closes the connection after the answer).
//   - The head of an answer is written from the handler's header map as it is when the head
//     goes out (at the first Flush, past 2048 bytes of body, or when the handler returns), not
//     as it was at WriteHeader: a header set after the first Write of a short body is sent
//     (net/http would drop it), which spares a copy of the map per request. Declared trailers
//     are left out of the head.
//   - A Transfer-Encoding the handler sets is not sent: the loop frames the answer as if it
//     were not there, where net/http chunks it ("chunked", even a short body) or ends it with
//     the connection ("identity"). The router's handler never sets one (the ReverseProxy
//     drops hop-by-hop headers).
package h1

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"slidecells/router/internal/rawio"
)

// sweepEvery is how often the server looks for late heads, idle connections and hang-ups.
const sweepEvery = 200 * time.Millisecond

// bufSize is the size of a connection's read and write buffers; a request head must fit in
// the read buffer to be served by the loop.
const bufSize = 4 << 10

// Server serves HTTP/1.1 on the listeners given to Serve. Set its fields before the first
// Serve; zero durations and sizes mean no limit, as in http.Server.
type Server struct {
	Handler http.Handler
	// ReadHeaderTimeout bounds the time from a connection's accept, or a keep-alive request's
	// first byte, to the end of the request's head.
	ReadHeaderTimeout time.Duration
	// IdleTimeout closes a keep-alive connection that sends no new request for this long.
	IdleTimeout time.Duration
	// MaxHeaderBytes caps a request head; heads beyond the loop's buffer are read by net/http,
	// which enforces it (431).
	MaxHeaderBytes int
	// MaxConns caps the connections served. At the cap, a new connection is served once a
	// connection that waits for a request is closed to make room (evictWaiting; the one that
	// has waited the longest among a sample of evictSample): one whose head has stalled for
	// evictHeadAfter (a client that connected and sent nothing, or a head trickling in) first,
	// else one idle between keep-alive requests. While no connection can be closed (every one
	// has a request in flight, or a head too recent) the new one waits, accepted, and the next
	// wait in the listener's queue. 0: no cap.
	MaxConns int
	// WrapConn, when set, wraps every accepted connection before it is read or written.
	WrapConn func(net.Conn) net.Conn
	// ErrorLog receives handler panics and accept errors; nil is the log package's logger.
	ErrorLog *log.Logger

	once     sync.Once
	fallback *http.Server
	handoff  *handoffListener
	sem      chan struct{}
	clock    atomic.Int64 // unix nanoseconds at the last sweep
	closing  atomic.Bool
	done     chan struct{} // closed when the server closes: the sweep stops
	doneOnce sync.Once

	baseCtx   context.Context // every connection's context derives from it (init)
	mu        sync.Mutex
	conns     map[*conn]struct{}
	listeners map[*net.Listener]struct{}
	// handed are the connections net/http serves, with how they wait for a request (a head
	// not yet read, idle between keep-alive requests, a body read off after the handler) and
	// the unix nanoseconds since when: evictWaiting may close them at MaxConns, as the loop's
	// own, but never one marked serving (its handler runs). Guarded by mu.
	handed map[net.Conn]handedWait

	evicted [2]atomic.Uint64 // connections closed to make room, by EvictStalledHead, EvictIdle
	waited  atomic.Uint64    // connections that waited for a place: none could be closed for them
}

// Why a connection was closed to make room at MaxConns (Stats.Evicted's index).
const (
	EvictStalledHead = iota // its head stalled for evictHeadAfter
	EvictIdle               // idle between keep-alive requests
)

// Stats is what the server's connections are now and were.
type Stats struct {
	// Open is the connections served now (those holding a MaxConns place; without a cap, the
	// loop's), MaxConns the cap (0: none).
	Open, MaxConns int
	// Evicted counts the connections closed to make room at MaxConns, by EvictStalledHead and
	// EvictIdle.
	Evicted [2]uint64
	// Waited counts the connections accepted at MaxConns that had to wait for a place because
	// no connection could be closed for them (every one busy, or its head too recent).
	Waited uint64
}

// Stats reports the server's connections; safe at any time, from any goroutine.
func (s *Server) Stats() Stats {
	s.init()
	st := Stats{MaxConns: s.MaxConns}
	if s.sem != nil {
		st.Open = len(s.sem)
	} else {
		s.mu.Lock()
		st.Open = len(s.conns)
		s.mu.Unlock()
	}
	for i := range st.Evicted {
		st.Evicted[i] = s.evicted[i].Load()
	}
	st.Waited = s.waited.Load()
	return st
}

// handedWait is how a connection served by net/http waits for a request, and since when.
type handedWait struct {
	idle    bool // between keep-alive requests; else its head is being read
	serving bool // its handler runs: never evicted
	closing bool // evictWaiting chose it: its next handler must not run
	since   int64
}

// handedConnKey is the request-context key of the connection net/http serves a request on
// (fallback.ConnContext), which servingHanded marks serving in s.handed while the handler runs.
type handedConnKey struct{}

func (s *Server) init() {
	s.once.Do(func() {
		s.done = make(chan struct{})
		s.conns = make(map[*conn]struct{})
		s.listeners = make(map[*net.Listener]struct{})
		s.handed = make(map[net.Conn]handedWait)
		if s.MaxConns > 0 {
			s.sem = make(chan struct{}, s.MaxConns)
		}
		s.handoff = &handoffListener{c: make(chan net.Conn), done: make(chan struct{})}
		s.fallback = &http.Server{
			Handler:           s.Handler,
			ReadHeaderTimeout: s.ReadHeaderTimeout,
			IdleTimeout:       s.IdleTimeout,
			MaxHeaderBytes:    s.MaxHeaderBytes,
			ErrorLog:          s.ErrorLog,
			ConnState:         s.handedState,
			ConnContext: func(ctx context.Context, nc net.Conn) context.Context {
				return context.WithValue(ctx, handedConnKey{}, nc)
			},
		}
		if s.MaxConns > 0 {
			s.fallback.Handler = s.servingHanded(s.Handler)
		}
		// A request's context holds the server as net/http's does (http.ServerContextKey; the
		// fallback, which has the same handler and limits): httputil.ReverseProxy panics with
		// http.ErrAbortHandler when an answer breaks mid-body only under a server, and that
		// panic is what makes the connection close without ending the body. Without it the
		// proxy logs and returns, and a chunked answer cut short would end like a whole one.
		s.baseCtx = context.WithValue(context.Background(), http.ServerContextKey, s.fallback)
		s.clock.Store(time.Now().UnixNano())
		go func() { _ = s.fallback.Serve(s.handoff) }()
		go s.sweep()
	})
}

// Serve accepts connections on ln and serves them until the server is shut down or closed,
// then returns http.ErrServerClosed (any other error of ln otherwise).
func (s *Server) Serve(ln net.Listener) error {
	s.init()
	if s.handoff.addr.Load() == nil {
		a := ln.Addr()
		s.handoff.addr.Store(&a)
	}
	s.mu.Lock()
	if s.closing.Load() {
		s.mu.Unlock()
		return http.ErrServerClosed
	}
	s.listeners[&ln] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.listeners, &ln)
		s.mu.Unlock()
	}()

	var backoff time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if s.closing.Load() {
				return http.ErrServerClosed
			}
			if errors.Is(err, net.ErrClosed) {
				return err
			}
			// As net/http does for a temporary error (too many open files, a connection
			// aborted before it was accepted): wait a little and accept again.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			s.logf("h1: accept error: %v; retrying in %v", err, backoff)
			time.Sleep(backoff)
			continue
		}
		backoff = 0
		if s.sem != nil && !s.takePlace() {
			// Shutdown or Close began (stop closes the hand-off listener): return now, as
			// net/http's Serve does, not when the last connection is gone.
			_ = nc.Close()
			return http.ErrServerClosed
		}
		c := s.newConn(nc)
		if c == nil {
			return http.ErrServerClosed
		}
		go c.serve()
	}
}

func (s *Server) release() {
	if s.sem != nil {
		<-s.sem
	}
}

// evictHeadAfter is how long a head may stall before the connection is closed to make room at
// MaxConns: a client's head comes in one piece right after it connects (a TLS handshake over a
// slow network included), so a connection still without a whole head after it sends nothing
// useful, and holding it would let anyone keep the cap full with connections that never ask.
const evictHeadAfter = 2 * time.Second

// takePlace takes one of the MaxConns places for a connection just accepted, making room at
// the cap (evictWaiting) and trying again every sweep while none can be closed. It reports
// false when the server began to close first.
//
// The place is taken after Accept, so that a waiting connection is closed only for one that
// came: at the cap one connection more is open, accepted and not yet served, and the rest wait
// in the listener's queue.
func (s *Server) takePlace() bool {
	select {
	case s.sem <- struct{}{}:
		return true
	default:
	}
	if !s.evictWaiting() {
		// Every connection has a request in flight (or a head too young to close): this one
		// waits, which is what an operator must hear of (Stats.Waited).
		s.waited.Add(1)
	}
	t := time.NewTicker(sweepEvery)
	defer t.Stop()
	for {
		select {
		case s.sem <- struct{}{}:
			return true
		case <-s.handoff.done:
			return false
		case <-t.C:
			s.evictWaiting()
		}
	}
}

// evictWaiting closes the connection that has waited for a request the longest (among a
// sample, pickVictimLocked), to free a place at MaxConns: a connection whose head has stalled
// for evictHeadAfter first, else the one idle the longest between keep-alive requests (RFC 9112, section 9.6: a server may close an
// idle connection at any time; clients open another). The loop's connections and those it
// handed to net/http alike; a connection with a request in flight is never chosen. It reports
// whether one was closed.
func (s *Server) evictWaiting() bool {
	for range 3 {
		if ok, raced := s.evictOnce(); !raced {
			return ok
		}
	}
	return false
}

// evictOnce is one try of evictWaiting; raced: the victim began a request meanwhile.
func (s *Server) evictOnce() (evicted, raced bool) {
	s.mu.Lock()
	victim, why := s.pickVictimLocked(time.Now().UnixNano())
	if victim.nc != nil {
		// Not to be chosen again, and no handler of net/http's may start on it (servingHanded).
		s.handed[victim.nc] = handedWait{closing: true}
	}
	s.mu.Unlock()
	switch {
	case victim.c != nil:
		// Only if it still waits: a connection that went on to a request meanwhile keeps it.
		if !victim.c.state.CompareAndSwap(victim.st, stateEvicted) {
			return false, true
		}
		victim.c.closeAsync()
	case victim.nc != nil:
		// net/http's read of the next head ends with the close, and the connection with it.
		go func() { _ = victim.nc.Close() }()
	default:
		return false, false
	}
	s.evicted[why].Add(1)
	return true, false
}

// waiter is a connection that waits for a request: the loop's (c) or net/http's (nc).
type waiter struct {
	c     *conn
	st    int32
	nc    net.Conn
	since int64
}

func (w waiter) none() bool { return w.c == nil && w.nc == nil }

// offer keeps o when it has waited longer than w.
func (w *waiter) offer(o waiter) {
	if w.none() || o.since < w.since {
		*w = o
	}
}

// evictSample is how many connections a choice looks at before it settles for the best found:
// Go's map iteration starts at a random place, so this is a sample, and a choice at the cap
// costs a bounded time however many connections there are (a full scan of 4,096 cost about
// 0.1 ms, BenchmarkEvictScan, on every connection accepted at the cap: a lever for a flood of
// connections). A full scan happens only while nothing in the sample can be closed.
const evictSample = 64

// pickVictimLocked chooses the connection evictWaiting closes (none() when there is none) and
// why; s.mu is held. Among the connections sampled (evictSample, the loop's first, then those
// net/http serves), a head stalled the longest first, else the connection idle the longest.
func (s *Server) pickVictimLocked(now int64) (waiter, int) {
	var head, idle waiter
	seen := 0
	enough := func() bool { seen++; return seen > evictSample && !(head.none() && idle.none()) }
	for c := range s.conns {
		if enough() {
			break
		}
		if c.closed.Load() {
			continue // closing already: its place comes back by itself
		}
		switch since, st := c.since.Load(), c.state.Load(); st {
		case stateHead:
			if now-since >= int64(evictHeadAfter) {
				head.offer(waiter{c: c, st: st, since: since})
			}
		case stateIdle:
			idle.offer(waiter{c: c, st: st, since: since})
		}
	}
	for nc, w := range s.handed {
		if enough() {
			break
		}
		switch {
		case w.serving || w.closing:
		case w.idle:
			idle.offer(waiter{nc: nc, since: w.since})
		case now-w.since >= int64(evictHeadAfter):
			head.offer(waiter{nc: nc, since: w.since})
		}
	}
	if head.none() {
		return idle, EvictIdle
	}
	return head, EvictStalledHead
}

// handedState follows the connections net/http serves (its ConnState hook), for evictWaiting.
// net/http calls a connection active once the first bytes of a request came, the head not yet
// whole: it waits for a request until its handler runs (servingHanded).
func (s *Server) handedState(nc net.Conn, st http.ConnState) {
	now := time.Now().UnixNano()
	s.mu.Lock()
	defer s.mu.Unlock()
	switch st {
	case http.StateNew:
		s.handed[nc] = handedWait{since: now}
	case http.StateActive:
		if w, ok := s.handed[nc]; !ok || w.idle && !w.closing {
			s.handed[nc] = handedWait{since: now}
		}
	case http.StateIdle:
		if !s.handed[nc].closing {
			s.handed[nc] = handedWait{idle: true, since: now}
		}
	default: // hijacked, closed
		delete(s.handed, nc)
	}
}

// servingHanded marks a connection net/http serves as serving while its handler runs, so that a
// request in flight is never closed to make room; a connection evictWaiting chose first
// (closing) does not run the handler at all.
func (s *Server) servingHanded(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		nc, ok := r.Context().Value(handedConnKey{}).(net.Conn)
		if ok {
			s.mu.Lock()
			closing := s.handed[nc].closing
			if !closing {
				s.handed[nc] = handedWait{serving: true}
			}
			s.mu.Unlock()
			if closing {
				panic(http.ErrAbortHandler) // evicted as the request came: as if closed first
			}
			defer func() {
				// net/http may now read off what the handler left of the body, without a
				// deadline: a wait like a head's, evictable after evictHeadAfter (the loop's
				// discard is stateHead). A hijacked connection (StateHijacked) left the map.
				s.mu.Lock()
				if w, ok := s.handed[nc]; ok && w.serving {
					s.handed[nc] = handedWait{since: time.Now().UnixNano()}
				}
				s.mu.Unlock()
			}()
		}
		h.ServeHTTP(w, r)
	})
}

// Shutdown stops accepting, closes idle connections, lets busy ones finish their request (the
// answer says Connection: close) and waits until all are closed or ctx ends. The connections
// net/http serves shut down the same way.
func (s *Server) Shutdown(ctx context.Context) error {
	s.init()
	s.stop()
	fallbackDone := make(chan error, 1)
	go func() { fallbackDone <- s.fallback.Shutdown(ctx) }()
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		s.mu.Lock()
		n := len(s.conns)
		now := time.Now().UnixNano()
		for c := range s.conns {
			// Idle connections, and (as net/http does with new ones) connections that have
			// sent no whole head for 5 s.
			switch c.state.Load() {
			case stateIdle:
				c.closeAsync()
			case stateHead:
				if now-c.since.Load() > int64(5*time.Second) {
					c.closeAsync()
				}
			}
		}
		s.mu.Unlock()
		if n == 0 {
			break
		}
		select {
		case <-ctx.Done():
			// The sweep goes on (it stops once the last connection is gone): the connections
			// left keep their timeouts, as net/http's keep their deadlines.
			return ctx.Err()
		case <-t.C:
		}
	}
	err := <-fallbackDone
	s.finish()
	return err
}

// Close closes the listeners and every connection at once, and ends the contexts of the
// requests in flight (as net/http's background read does when the connection closes).
func (s *Server) Close() error {
	s.init()
	s.stop()
	s.mu.Lock()
	for c := range s.conns {
		c.closeAsync()
	}
	s.mu.Unlock()
	err := s.fallback.Close()
	s.finish()
	return err
}

// stop marks the server closing and closes its listeners.
func (s *Server) stop() {
	s.mu.Lock()
	s.closing.Store(true)
	for ln := range s.listeners {
		_ = (*ln).Close()
	}
	s.mu.Unlock()
	_ = s.handoff.Close()
}

func (s *Server) finish() { s.doneOnce.Do(func() { close(s.done) }) }

func (s *Server) logf(format string, args ...any) {
	if s.ErrorLog != nil {
		s.ErrorLog.Printf(format, args...)
	} else {
		log.Printf(format, args...)
	}
}

// Connection states, as the sweep reads them.
const (
	stateHead    int32 = iota // reading a request head: ReadHeaderTimeout applies
	stateIdle                 // waiting for a keep-alive request's first byte: IdleTimeout applies
	stateActive               // the handler runs: watched for a hang-up
	stateEvicted              // evictWaiting chose it: no handler may start on it
)

// sweep enforces the head and idle timeouts and notices hang-ups, every sweepEvery.
func (s *Server) sweep() {
	t := time.NewTicker(sweepEvery)
	defer t.Stop()
	var busy, waiting []*conn
	for {
		select {
		case <-s.done:
			return
		case now := <-t.C:
			ns := now.UnixNano()
			s.clock.Store(ns)
			busy, waiting = busy[:0], waiting[:0]
			s.mu.Lock()
			if s.closing.Load() && len(s.conns) == 0 {
				// Shut down, and no connection is left to watch (none is added once closing).
				s.mu.Unlock()
				s.finish()
				return
			}
			for c := range s.conns {
				since := ns - c.since.Load()
				switch c.state.Load() {
				case stateHead:
					// since is the sweep's clock when the state began, up to one sweep
					// early: a sweep more of grace, so that no timeout is cut short.
					if s.ReadHeaderTimeout > 0 && since > int64(s.ReadHeaderTimeout+sweepEvery) {
						c.closeAsync()
					}
				case stateIdle:
					if s.IdleTimeout > 0 && since > int64(s.IdleTimeout+sweepEvery) {
						c.closeAsync()
					}
				case stateActive:
					// since is the sweep clock's reading before the state began: more than
					// 1.5 sweeps ago means it has lasted a full sweep (ticks jitter).
					if since > int64(sweepEvery*3/2) && c.rc != nil {
						busy = append(busy, c)
					}
					continue
				}
				// A connection waiting for a request (idle, or in its head) for more than a
				// sweep is looked at once per wait: in raw mode an end of input that came
				// with the last bytes read brings no readiness of its own (serveRaw).
				if since > int64(sweepEvery*3/2) && c.rc != nil && !c.peeked.Load() {
					waiting = append(waiting, c)
				}
			}
			s.mu.Unlock()
			for _, c := range busy {
				if c.hungUp() {
					c.cancel()
				}
			}
			for _, c := range waiting {
				c.peeked.Store(true)
				if c.hungUp() {
					c.kick()
				}
			}
		}
	}
}

// conn is one client connection served by the loop.
type conn struct {
	s      *Server
	nc     net.Conn
	rc     syscall.RawConn // the socket (raw reads, the sweep's MSG_PEEK); nil when not a socket
	closed atomic.Bool     // closeAsync ran
	peeked atomic.Bool     // the sweep looked for a hang-up in the current wait
	kicked atomic.Bool     // the sweep ended the wait with a past read deadline (kick)
	br     *bufio.Reader
	bw     *bufio.Writer
	ctx    context.Context
	cancel context.CancelFunc
	remote string
	state  atomic.Int32
	since  atomic.Int64 // unix nanoseconds when the state began (the sweep's clock)
	stage  []byte       // the answers' staging buffer, kept from request to request

	dateSec int64 // the second dateBuf was formatted for
	dateBuf []byte

	// Raw mode (serveRaw): the state of the RawConn.Read the connection is served in.
	raw     bool    // source reads the socket raw (inside the RawConn.Read callback)
	fd      uintptr // the socket, while raw
	drained bool    // the last raw read was short: the socket had nothing more
	exit    int     // why the callback returned true
	pending *http.Request

	tmpl *http.Request // an empty request with the connection's context: parseRequest copies it

	served bool // a request was served: the next one is a keep-alive request
}

// closeAsync closes the connection from another goroutine (the sweep, Shutdown, Close)
// without waiting: closing a socket waits for a read in progress on it, and in raw mode a
// handler runs inside one. The request's context ends at once; the handler's next write fails.
func (c *conn) closeAsync() {
	if c.closed.CompareAndSwap(false, true) {
		c.cancel()
		go func() { _ = c.nc.Close() }()
	}
}

// newConn registers an accepted connection with the sweep; nil (the connection closed) when
// the server is closing.
func (s *Server) newConn(nc net.Conn) *conn {
	var rc syscall.RawConn
	if sc, ok := nc.(syscall.Conn); ok {
		rc, _ = sc.SyscallConn()
	}
	if s.WrapConn != nil {
		nc = s.WrapConn(nc)
	}
	if s.sem != nil {
		nc = &limitConn{Conn: nc, release: s.release}
	}
	c := &conn{s: s, nc: nc, rc: rc, remote: nc.RemoteAddr().String()}
	c.ctx, c.cancel = context.WithCancel(context.WithValue(s.baseCtx, http.LocalAddrContextKey, nc.LocalAddr()))
	c.setState(stateHead, time.Now().UnixNano())
	s.mu.Lock()
	if s.closing.Load() {
		// Shutdown or Close began after the accept (stop sets closing under s.mu): they may be
		// done looking for connections and the sweep may have stopped, so this one would be
		// served unwatched after they returned. It is closed instead (nil).
		s.mu.Unlock()
		c.cancel()
		_ = nc.Close()
		return nil
	}
	s.conns[c] = struct{}{}
	s.mu.Unlock()
	return c
}

func (c *conn) setState(st int32, now int64) {
	c.since.Store(now)
	c.state.Store(st)
	c.peeked.Store(false)
}

// kick ends the connection's wait for readiness (a read deadline in the past), for serveRaw
// to read again: the sweep saw the client's end of input, which came with the bytes last read
// and so will bring no readiness of its own.
func (c *conn) kick() {
	c.kicked.Store(true)
	_ = c.nc.SetReadDeadline(time.Unix(1, 0))
}

// forget takes c off the sweep's list.
func (c *conn) forget() {
	c.s.mu.Lock()
	delete(c.s.conns, c)
	c.s.mu.Unlock()
	c.cancel()
}

// hungUp reports whether the client closed its side or reset the connection, without reading
// anything off it (bytes of a pipelined request stay where they are).
func (c *conn) hungUp() bool {
	var gone bool
	_ = c.rc.Control(func(fd uintptr) {
		var b [1]byte
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		gone = (n == 0 && err == nil) || (err != nil && err != syscall.EAGAIN && err != syscall.EINTR)
	})
	return gone
}

var (
	bufReaders sync.Pool
	bufWriters sync.Pool
)

func (c *conn) serve() {
	src := source{c}
	if v, ok := bufReaders.Get().(*bufio.Reader); ok {
		v.Reset(src)
		c.br = v
	} else {
		c.br = bufio.NewReaderSize(src, bufSize)
	}
	if v, ok := bufWriters.Get().(*bufio.Writer); ok {
		v.Reset(sink{c})
		c.bw = v
	} else {
		c.bw = bufio.NewWriterSize(sink{c}, bufSize)
	}
	handedOff := false
	defer func() {
		c.forget()
		if !handedOff {
			_ = c.nc.Close()
			c.br.Reset(nil)
			bufReaders.Put(c.br)
		}
		c.bw.Reset(nil)
		bufWriters.Put(c.bw)
	}()
	for {
		var req *http.Request
		outcome := readPlain
		if c.rc != nil {
			outcome, req = c.serveRaw()
		} else {
			req, outcome = c.readRequest()
		}
		switch outcome {
		case readFailed:
			return
		case readOther:
			handedOff = c.handOff()
			return
		}
		if !c.serveOne(req) {
			return
		}
		if c.br.Buffered() < 4 {
			c.setState(stateIdle, c.s.clock.Load())
			// Idle until 4 bytes of the next request are in, as net/http's server waits: an
			// end of input before them closes the connection without an answer, one after
			// them is a cut head that net/http answers (400). Raw mode applies the same rule
			// in readRequest.
			if c.rc == nil {
				if _, err := c.br.Peek(4); err != nil {
					return
				}
			}
		} else {
			// The next head has begun (it came with this request's body): ReadHeaderTimeout
			// applies from here, or a head that never ends would hold a busy connection.
			c.setState(stateHead, c.s.clock.Load())
		}
	}
}

// serveRaw serves plain bodiless requests inside one RawConn.Read on the socket, until a
// request that is not (returned with readPlain, for serve to run with the connection read
// the usual way: it has a body), another kind of request (readOther) or the end of the
// connection (readFailed).
//
// Why inside the callback: each RawConn.Read (and so each net.Conn.Read) starts by forgetting
// the readiness the poller saw, so its first try must be a read, which between keep-alive
// requests finds nothing (EAGAIN) and costs a system call per request. Inside one RawConn.Read
// nothing is forgotten: after a short read (the socket drained) the callback can wait for the
// next readiness at once, and the next request's bytes are read by one system call.
//
// What it gives up: an end of input that arrives with a request's last bytes is not seen when
// the callback waits after serving that request (its readiness was the one that woke the
// read). The sweep finds such a connection within two sweeps (a MSG_PEEK once per wait longer
// than a sweep) and kicks it: serveRaw reads again and sees the end, as net/http would have
// at once.
func (c *conn) serveRaw() (int, *http.Request) {
	c.drained, c.exit, c.pending = false, readFailed, nil
	err := c.rc.Read(c.onReadable)
	// A kick's past deadline is cleared whatever ended the read: the connection may go on to
	// a request with a body, read the usual way. A deadline that ended the wait without a kick
	// is cleared too, and the wait goes on: a handler left it on the connection (the body-rate
	// rule's, which a transport's goroutine can set as the handler returns), and the loop's
	// waits have none of their own (the sweep times them). net/http's server sets the read
	// deadline anew for every request, so there too a stale one never cuts the connection.
	for kicked := c.kicked.Swap(false); kicked || errors.Is(err, os.ErrDeadlineExceeded); kicked = c.kicked.Swap(false) {
		_ = c.nc.SetReadDeadline(time.Time{})
		if err == nil {
			break
		}
		c.drained = false
		err = c.rc.Read(c.onReadable)
	}
	c.raw = false
	if err != nil {
		return readFailed, nil
	}
	req := c.pending
	c.pending = nil
	return c.exit, req
}

// onReadable is serveRaw's callback: it returns false to wait for the socket to be readable.
// Reads through source are raw from here until serveRaw returns.
func (c *conn) onReadable(fd uintptr) bool {
	c.fd, c.raw = fd, true
	for {
		if c.drained && c.br.Buffered() == 0 {
			c.drained = false
			return false // nothing there: wait, and read when woken
		}
		req, outcome := c.readRequest()
		switch outcome {
		case readAgain:
			if c.br.Buffered() > 0 && c.state.Load() == stateIdle {
				c.since.Store(c.s.clock.Load())
				c.state.CompareAndSwap(stateIdle, stateHead) // not over stateEvicted
			}
			return false
		case readFailed, readOther:
			c.exit = outcome
			return true
		}
		if req.Body != http.NoBody {
			c.exit, c.pending = readPlain, req
			return true
		}
		if !c.serveOne(req) {
			c.exit = readFailed
			return true
		}
		c.setState(stateIdle, c.s.clock.Load())
	}
}

// serveOne serves a request whose head was read; it reports whether the connection may carry
// another.
func (c *conn) serveOne(req *http.Request) bool {
	// A connection evictWaiting chose closes without serving the request it has just read, as
	// if the close had come first: a request either never reaches the handler or is served.
	c.since.Store(c.s.clock.Load())
	c.peeked.Store(false)
	if st := c.state.Load(); st == stateEvicted || !c.state.CompareAndSwap(st, stateActive) {
		return false
	}
	if !c.serveRequest(req) || c.s.closing.Load() {
		return false
	}
	c.served = true
	return true
}

// sink is what the connection's write buffer writes to: the connection, until closeAsync
// (the socket itself closes only when a read in progress on it ends, which in raw mode is when
// the handler returns; its answer must not go out after Close).
type sink struct{ c *conn }

func (s sink) Write(p []byte) (int, error) {
	if s.c.closed.Load() {
		return 0, net.ErrClosed
	}
	return s.c.nc.Write(p)
}

// source is what the connection's read buffer reads from: the socket raw inside serveRaw's
// callback (EAGAIN as errAgain), the connection otherwise.
type source struct{ c *conn }

// errAgain is a raw read's EAGAIN: nothing to read yet.
var errAgain = errors.New("h1: nothing to read yet")

func (s source) Read(p []byte) (int, error) {
	c := s.c
	if !c.raw {
		return c.nc.Read(p)
	}
	n, err := rawio.Read(c.fd, p)
	switch {
	case err == syscall.EAGAIN:
		return 0, errAgain
	case err != nil:
		return 0, &net.OpError{Op: "read", Net: "tcp", Source: c.nc.LocalAddr(), Addr: c.nc.RemoteAddr(), Err: os.NewSyscallError("read", err)}
	case n == 0:
		return 0, io.EOF
	}
	c.drained = n < len(p)
	return n, nil
}

// handOff gives the connection, with what its buffer holds, to the net/http server.
func (c *conn) handOff() bool {
	c.forget()
	select {
	case c.s.handoff.c <- &replayConn{Conn: c.nc, br: c.br}:
		return true
	case <-c.s.handoff.done:
		return false
	}
}

// serveRequest runs the handler and finishes the answer; it reports whether the connection
// may carry another request.
func (c *conn) serveRequest(req *http.Request) (keep bool) {
	// A response of its own per request, header map included, as net/http's: a goroutine the
	// handler leaves behind that writes or sets headers late reaches a finished response, never
	// the next request's answer (another user's, behind a proxy that shares connections).
	w := newResponse(c, req)
	defer func() { c.stage = w.stage[:0] }()
	defer func() {
		if p := recover(); p != nil {
			keep = false
			// What the handler had written goes out before the connection closes, as with
			// net/http's final flush: the client sees an answer cut short, not none at all
			// (which a client may take for a request never served and retry).
			_ = c.bw.Flush()
			if _, ok := req.Body.(*body); ok {
				// The connection is done for. Closed now, it ends a read of the body that a
				// goroutine of the handler's may have in progress, which closeBody waits for,
				// as net/http's server closes it. (A request with a body is never served in raw
				// mode, whose read this Close would wait for instead.)
				_ = c.nc.Close()
			}
			if p != http.ErrAbortHandler {
				buf := make([]byte, 64<<10)
				buf = buf[:runtime.Stack(buf, false)]
				c.s.logf("http: panic serving %v: %v\n%s", c.remote, p, buf)
			}
		}
		closeBody(req)
		if w.notify != nil {
			w.notify.stop()
		}
		w.req = nil
	}()
	c.s.Handler.ServeHTTP(w, req)
	// The body is closed before the answer goes out (finish's discard reads on regardless): a
	// goroutine the handler leaves reading it (net/http's Transport writes a request body on one
	// of its own, which can outlive the round trip) must fail from here on, as with net/http's
	// server, not read the connection's buffer, which holds the next request, or once the
	// connection is closed another connection's from the pool (or a nil reader: a panic).
	closeBody(req)
	return w.finish() && c.ctx.Err() == nil
}

// closeBody closes a body of the loop's own; once closed, reads fail.
func closeBody(req *http.Request) {
	if b, ok := req.Body.(*body); ok {
		_ = b.Close()
	}
}

// handoffListener is the net/http server's listener: the connections the loop hands over.
type handoffListener struct {
	c    chan net.Conn
	addr atomic.Pointer[net.Addr]
	done chan struct{}
	once sync.Once
}

func (l *handoffListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.c:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *handoffListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *handoffListener) Addr() net.Addr {
	if a := l.addr.Load(); a != nil {
		return *a
	}
	return &net.TCPAddr{}
}

// replayConn is a handed-over connection: what the loop had buffered is read first.
type replayConn struct {
	net.Conn
	mu sync.Mutex
	br *bufio.Reader
}

func (c *replayConn) Read(p []byte) (int, error) {
	c.mu.Lock()
	br := c.br
	if br != nil && br.Buffered() == 0 {
		c.br = nil
		br.Reset(nil)
		bufReaders.Put(br)
		br = nil
	}
	if br != nil {
		n, err := br.Read(p)
		c.mu.Unlock()
		return n, err
	}
	c.mu.Unlock()
	return c.Conn.Read(p)
}

// CloseWrite passes net/http's half-close on (closeWriteAndWait, after an answer such as 431
// that leaves the request unread): without it net/http closes at once, and the unread bytes
// make the kernel reset the connection, which can lose the answer on its way to the client.
func (c *replayConn) CloseWrite() error { return closeWrite(c.Conn) }

func closeWrite(nc net.Conn) error {
	if cw, ok := nc.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// limitConn gives back its place under Server.MaxConns when closed, once.
type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

// CloseWrite passes a half-close on (replayConn.CloseWrite).
func (c *limitConn) CloseWrite() error { return closeWrite(c.Conn) }

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
