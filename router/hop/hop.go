// Package hop is the router's HTTP/1.1 client for the hop to one cell: an http.RoundTripper
// for the cell's httputil.ReverseProxy that costs less CPU per request than http.Transport on
// the requests that make up most of the traffic.
//
// http.Transport runs two goroutines per connection and hands every request and response
// between them and the caller over channels; under load those hand-offs cost more CPU than the
// router's own work (see BENCHMARKS.md). A Transport here writes the request and reads the
// response on the caller's goroutine over a pooled keep-alive connection, parsing the common
// response heads itself (readHead) and any other with net/http's own http.ReadResponse. On a
// connection pooled moments ago, writing the request and waiting for the answer are one
// RawConn.Read (no read that fails with EAGAIN), and its socket I/O is raw system calls
// (router/internal/rawio says why).
//
// It takes only requests that are safe to send again: no body, no protocol upgrade, plain
// http, and a method that is idempotent by definition (GET, HEAD, OPTIONS, TRACE) or a request
// that carries an Idempotency-Key — the rule http.Transport uses to retry. Those can be resent
// on a fresh connection when a pooled one turns out to have been closed by the cell while idle,
// which is how this transport learns of closed idle connections without a reader goroutine.
// Everything else (requests with bodies, which need to read an early answer while still
// sending; upgrades; https) goes to the Fallback transport unchanged. As with http.Transport, a
// resent request may run twice when the cell processed it and then closed the connection
// without answering (a crash mid-request): acceptable for these methods, and a keyed request's
// second run replays the first's answer at the cell.
//
// Differences from http.Transport on the requests it takes: 1xx informational answers (103
// Early Hints) are skipped rather than passed to the ReverseProxy; connections are pooled LIFO
// and at most MaxIdle are kept (0 keeps none); a connection with bytes left after an answer is
// closed rather than pooled.
//
// Cancellation and the response header timeout are enforced by one watchdog goroutine per
// Transport that looks at the connections in use every watchEvery (50 ms) and gives a late or
// canceled one a deadline in the past; a context callback and two deadline changes per request
// would cost more than the rest of the round trip's bookkeeping. A canceled request or late
// headers therefore end up to 50 ms later than the exact moment.
package hop

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/net/http/httpguts"

	"slidecells/router/internal/rawio"
)

// Config configures a Transport.
type Config struct {
	// Addr is the cell's host:port.
	Addr string
	// DialTimeout bounds connecting to the cell.
	DialTimeout time.Duration
	// MaxIdle is the most idle keep-alive connections kept; more are closed when released.
	MaxIdle int
	// IdleTimeout closes connections idle for longer. It should be shorter than the cell's
	// own idle timeout so that the cell rarely closes a connection this side still pools.
	IdleTimeout time.Duration
	// ResponseHeaderTimeout bounds the time from taking a connection for the request (from
	// the pool, or once dialed) to having read the response headers, give or take watchEvery.
	// Zero means no limit (the request context still applies).
	ResponseHeaderTimeout time.Duration
	// Fallback carries the requests this transport does not take. Required.
	Fallback http.RoundTripper
}

// Transport is an http.RoundTripper for one HTTP/1.1 origin. It is safe for concurrent use.
type Transport struct {
	cfg    Config
	dialer net.Dialer

	mu       sync.Mutex
	idle     []*conn            // oldest first; taken from the end
	conns    map[*conn]struct{} // every open connection, for the watchdog
	watching bool               // the watchdog runs; it stops once closed with no connection left
	closed   bool
}

// New returns a Transport for cfg.
func New(cfg Config) (*Transport, error) {
	if cfg.Fallback == nil {
		return nil, errors.New("hop: a fallback transport is required")
	}
	if _, _, err := net.SplitHostPort(cfg.Addr); err != nil {
		return nil, fmt.Errorf("hop: address %q: %w", cfg.Addr, err)
	}
	return &Transport{
		cfg:    cfg,
		dialer: net.Dialer{Timeout: cfg.DialTimeout, KeepAlive: 30 * time.Second},
		conns:  make(map[*conn]struct{}),
	}, nil
}

// Takes reports whether the transport sends req itself rather than through the fallback.
func Takes(req *http.Request) bool {
	if req.URL.Scheme != "http" || (req.Body != nil && req.Body != http.NoBody) ||
		req.ContentLength != 0 || len(req.TransferEncoding) > 0 || len(req.Trailer) > 0 {
		return false
	}
	if _, ok := req.Header["Upgrade"]; ok {
		return false
	}
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	_, ok := req.Header["Idempotency-Key"]
	if !ok {
		_, ok = req.Header["X-Idempotency-Key"]
	}
	return ok
}

// RoundTrip sends req and returns the response. The response body must be read to its end or
// closed; reading it to its end returns the connection to the pool.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !Takes(req) {
		return t.cfg.Fallback.RoundTrip(req)
	}
	ctx := req.Context()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c, reused, err := t.get(ctx)
	if err != nil {
		return nil, err
	}
	res, err := c.roundTrip(req)
	if err == nil {
		return res, nil
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if !reused || c.nread != 0 || !closedByPeer(err) {
		return nil, err
	}
	// The cell closed the pooled connection while it was idle, before any answer: the request
	// was not processed. The pooled connections idle since before this one are likely closed
	// too: drop them, and send the request once more on a new connection.
	t.closeIdleSince(c.idleAt)
	if c, err = t.dial(ctx); err != nil {
		return nil, err
	}
	res, err = c.roundTrip(req)
	if err != nil && ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return res, err
}

// closedByPeer reports whether err is what writing to or reading from a connection the peer
// has closed gives, as opposed to a timeout or a malformed answer.
func closedByPeer(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// CloseIdleConnections closes the pooled connections, and the fallback's when it has the
// method. Connections in use are closed when their response ends.
func (t *Transport) CloseIdleConnections() {
	t.mu.Lock()
	idle := t.idle
	t.idle = nil
	t.mu.Unlock()
	closeAll(idle)
	if ci, ok := t.cfg.Fallback.(interface{ CloseIdleConnections() }); ok {
		ci.CloseIdleConnections()
	}
}

// closeIdleSince closes the pooled connections idle since at or before t0.
func (t *Transport) closeIdleSince(t0 time.Time) {
	t.mu.Lock()
	old := t.takeIdleSinceLocked(t0)
	t.mu.Unlock()
	closeAll(old)
}

// takeIdleSinceLocked removes from the pool, and returns, the connections idle since at or
// before t0 (the front of the pool, which is ordered by idleAt). t.mu is held.
func (t *Transport) takeIdleSinceLocked(t0 time.Time) []*conn {
	i := 0
	for i < len(t.idle) && !t.idle[i].idleAt.After(t0) {
		i++
	}
	if i == 0 {
		return nil
	}
	old := append([]*conn(nil), t.idle[:i]...)
	n := copy(t.idle, t.idle[i:])
	clear(t.idle[n:])
	t.idle = t.idle[:n]
	return old
}

func closeAll(cs []*conn) {
	for _, c := range cs {
		c.close()
	}
}

// Close closes the idle connections and stops pooling. Connections in use are closed when
// their response ends; until then the watchdog keeps enforcing their cancellation and header
// timeout, and stops once none is left.
func (t *Transport) Close() {
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
	t.CloseIdleConnections()
}

// get takes the most recently used idle connection that has not been idle longer than
// IdleTimeout, or dials a new one.
func (t *Transport) get(ctx context.Context) (*conn, bool, error) {
	now := time.Now()
	t.mu.Lock()
	expired := t.takeExpiredLocked(now)
	if n := len(t.idle); n > 0 {
		c := t.idle[n-1]
		t.idle[n-1] = nil
		t.idle = t.idle[:n-1]
		t.mu.Unlock()
		closeAll(expired)
		c.recent = now.Sub(c.idleAt) < recentIdle
		c.takenAt = now
		return c, true, nil
	}
	t.mu.Unlock()
	closeAll(expired)
	c, err := t.dial(ctx)
	return c, false, err
}

// takeExpiredLocked removes from the pool, and returns, the connections idle for longer than
// IdleTimeout at now. t.mu is held.
func (t *Transport) takeExpiredLocked(now time.Time) []*conn {
	if t.cfg.IdleTimeout <= 0 {
		return nil
	}
	return t.takeIdleSinceLocked(now.Add(-t.cfg.IdleTimeout - 1))
}

func (t *Transport) dial(ctx context.Context) (*conn, error) {
	nc, err := t.dialer.DialContext(ctx, "tcp", t.cfg.Addr)
	if err != nil {
		return nil, err
	}
	c := &conn{t: t, nc: nc, takenAt: time.Now()}
	c.br = bufio.NewReaderSize(c, 4096)
	c.bw = bufio.NewWriterSize(&c.out, 4096)
	if sc, ok := nc.(syscall.Conn); ok {
		if rc, err := sc.SyscallConn(); err == nil {
			c.rc = rc
			c.rawFn = c.rawSendRead
		}
	}
	t.mu.Lock()
	t.conns[c] = struct{}{}
	if !t.watching {
		t.watching = true
		go t.watch()
	}
	t.mu.Unlock()
	return c, nil
}

// put pools a connection whose last response was read to its end, closing those idle for
// longer than IdleTimeout on the way.
func (t *Transport) put(c *conn) {
	c.idleAt = time.Now()
	t.mu.Lock()
	if t.closed || len(t.idle) >= t.cfg.MaxIdle {
		t.mu.Unlock()
		c.close()
		return
	}
	stale := t.takeExpiredLocked(c.idleAt)
	t.idle = append(t.idle, c)
	t.mu.Unlock()
	closeAll(stale)
}

// watchEvery is how often the watchdog looks at the connections in use.
const watchEvery = 50 * time.Millisecond

// watch ends the round trips whose request context has ended or whose response headers are
// late, by giving their connection a deadline in the past. Doing this from one goroutine a few
// times a second instead of a context callback and two deadline changes per request saves
// about 1.5 µs of CPU per request (BENCHMARKS.md); it delays a cancellation or a header timeout
// by up to watchEvery.
func (t *Transport) watch() {
	tick := time.NewTicker(watchEvery)
	defer tick.Stop()
	var busy []*conn
	for range tick.C {
		busy = busy[:0]
		t.mu.Lock()
		if t.closed && len(t.conns) == 0 {
			t.watching = false
			t.mu.Unlock()
			return
		}
		for c := range t.conns {
			busy = append(busy, c)
		}
		t.mu.Unlock()
		now := time.Now().UnixNano()
		for _, c := range busy {
			c.check(now)
		}
		clear(busy)
	}
}

// conn is one keep-alive connection to the cell. It is used by one request at a time.
type conn struct {
	t     *Transport
	nc    net.Conn
	br    *bufio.Reader // reads through conn.Read, which counts
	bw    *bufio.Writer // writes into out
	out   pending       // the request, written by bw, sent by the first Read of its answer
	nread int64         // bytes read in the current round trip
	// recent: the connection came from the pool after less than recentIdle idle, so the cell
	// has not closed it (see sendAndRead).
	recent bool
	// rc, when the connection has one, sends the request and waits for the answer in one
	// RawConn.Read (rawSendRead, held in rawFn so that passing it allocates nothing);
	// sending, sent, rp, rn and rerr are that call's state.
	rc      syscall.RawConn
	rawFn   func(uintptr) bool
	sending []byte
	sent    int
	rp      []byte
	rn      int
	rerr    error
	// headerLimit, while not zero, is how many bytes the round trip may read before its
	// response headers are complete (the bufio.Reader reads ahead, so it is a bound, not an
	// exact header size).
	headerLimit int64
	idleAt      time.Time
	// takenAt is when the round trip took the connection (from the pool, or dialed): the
	// response header timeout counts from it, which saves reading the clock again.
	takenAt time.Time

	// mu guards the round trip's state as the watchdog sees it.
	mu       sync.Mutex
	ctx      context.Context // of the request in flight; nil between requests
	headerBy int64           // unix nanoseconds by which the headers must be read; 0: not waiting
	aborted  bool            // the watchdog ended the round trip; the connection is spent
}

// MaxHeaderBytes bounds a response's status line and headers, as http.Transport's
// MaxResponseHeaderBytes does; a cell that sends more fails the request.
const MaxHeaderBytes = 1 << 20

var errHeadersTooLarge = fmt.Errorf("hop: the response headers exceed %d bytes", MaxHeaderBytes)

// Read reads from the network connection and counts what it read. The first Read of a round
// trip sends the request first.
func (c *conn) Read(p []byte) (int, error) {
	if c.headerLimit != 0 && c.nread >= c.headerLimit {
		return 0, errHeadersTooLarge
	}
	var n int
	var err error
	switch {
	case len(c.out.b) > 0:
		n, err = c.sendAndRead(p)
	case c.rc != nil:
		n, err = c.rawRead(p)
	default:
		n, err = c.nc.Read(p)
	}
	c.nread += int64(n)
	return n, err
}

// pending collects the request as bufio.Writer flushes it.
type pending struct{ b []byte }

func (p *pending) Write(b []byte) (int, error) {
	p.b = append(p.b, b...)
	return len(b), nil
}

// maxKeptRequestBuffer is the largest request buffer a pooled connection keeps for the next.
const maxKeptRequestBuffer = 16 << 10

// recentIdle is how long a pooled connection may have been idle for sendAndRead's fast path.
// A cell closes idle keep-alive connections after tens of seconds, far beyond it.
const recentIdle = time.Second

// sendAndRead sends the pending request and reads the first bytes of its answer into p.
//
// On a connection that was idle only briefly (recent) it writes the request and waits for the
// answer inside one RawConn.Read, which resets the connection's read readiness before the
// write: the answer, which cannot come before the request, then always arrives as a new
// readiness event, so the read that net.Conn.Read would try first, and that fails with
// EAGAIN on nearly every round trip (the cell has not answered yet), is skipped: one system
// call less per request. Fresh connections, connections idle for longer, and a request the
// socket did not take whole in one write go the plain way (write, then read), which also
// notices a close by the cell that came before the request.
func (c *conn) sendAndRead(p []byte) (int, error) {
	out := c.out.b
	c.out.b = out[:0]
	if cap(out) > maxKeptRequestBuffer {
		c.out.b = nil // a rare large request: do not keep its buffer with the connection
	}
	sent := 0
	if c.rc != nil && c.recent {
		c.sending, c.sent, c.rp, c.rn, c.rerr = out, 0, p, 0, nil
		err := c.rc.Read(c.rawFn)
		sent, c.sending, c.rp = c.sent, nil, nil
		switch {
		case err != nil:
			return 0, err
		case sent < len(out) && c.rerr != nil: // the write failed
			return 0, c.rerr
		case sent == len(out):
			return c.rn, c.rerr
		}
		// A partial write: the rest goes the plain way.
	}
	if _, err := c.nc.Write(out[sent:]); err != nil {
		return 0, err
	}
	return c.nc.Read(p)
}

// rawSendRead is the RawConn.Read callback of sendAndRead and rawRead: while part of the
// request is unsent (sendAndRead's first call) it writes it and asks to wait for readiness;
// otherwise it reads. Both are raw system calls (rawio).
func (c *conn) rawSendRead(fd uintptr) bool {
	if c.sent < len(c.sending) {
		chunk := c.sending[c.sent:]
		if len(chunk) > rawio.MaxWrite {
			chunk = chunk[:rawio.MaxWrite] // the rest goes the plain way
		}
		n, err := rawio.Write(fd, chunk)
		c.sent += n
		if err != nil && err != syscall.EAGAIN {
			c.rerr = os.NewSyscallError("write", err)
			return true
		}
		// Whole: wait for the answer. Partial (or none): stop; sendAndRead writes the rest.
		return c.sent < len(c.sending)
	}
	n, err := rawio.Read(fd, c.rp)
	switch {
	case err == syscall.EAGAIN:
		return false
	case err != nil:
		c.rn, c.rerr = 0, os.NewSyscallError("read", err)
	case n == 0 && len(c.rp) > 0:
		c.rn, c.rerr = 0, io.EOF
	default:
		c.rn = n
	}
	return true
}

// rawRead reads into p through the raw connection (rawio: no scheduler bookkeeping), trying
// the read first as net.Conn.Read does.
func (c *conn) rawRead(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	c.sending, c.sent, c.rp, c.rn, c.rerr = nil, 0, p, 0, nil
	err := c.rc.Read(c.rawFn)
	c.rp = nil
	if err != nil {
		return 0, err
	}
	return c.rn, c.rerr
}

// aLongTimeAgo is a deadline in the past: it makes blocked reads and writes return at once.
var aLongTimeAgo = time.Unix(1, 0)

// max1xx is how many informational answers may precede the final one.
const max1xx = 5

// check is the watchdog's look at one connection.
func (c *conn) check(now int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ctx == nil || c.aborted {
		return
	}
	if c.ctx.Err() != nil || (c.headerBy != 0 && now > c.headerBy) {
		c.aborted = true
		_ = c.nc.SetDeadline(aLongTimeAgo)
	}
}

// begin marks the start of a round trip for the watchdog.
func (c *conn) begin(ctx context.Context) {
	var by int64
	if d := c.t.cfg.ResponseHeaderTimeout; d > 0 {
		by = c.takenAt.Add(d).UnixNano()
	}
	c.mu.Lock()
	c.ctx, c.headerBy = ctx, by
	c.mu.Unlock()
}

// gotHeaders tells the watchdog the headers are in; it reports false when the watchdog already
// ended the round trip.
func (c *conn) gotHeaders() bool {
	c.mu.Lock()
	c.headerBy = 0
	ok := !c.aborted
	c.mu.Unlock()
	return ok
}

// err is the error to report for a failed read or write: the request context's error when the
// watchdog ended the round trip because of it, else err.
func (c *conn) err(err error) error {
	c.mu.Lock()
	aborted, ctx := c.aborted, c.ctx
	c.mu.Unlock()
	if aborted && ctx != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// end marks the end of a round trip and reports whether it ended without the watchdog.
func (c *conn) end() bool {
	c.mu.Lock()
	c.ctx, c.headerBy = nil, 0
	ok := !c.aborted
	c.mu.Unlock()
	return ok
}

// close closes the connection and forgets it.
func (c *conn) close() {
	c.nc.Close()
	c.t.mu.Lock()
	delete(c.t.conns, c)
	c.t.mu.Unlock()
}

// roundTrip writes req and reads the response headers. On error the connection is closed.
func (c *conn) roundTrip(req *http.Request) (*http.Response, error) {
	c.nread, c.headerLimit = 0, MaxHeaderBytes
	c.begin(req.Context())
	fail := func(err error) (*http.Response, error) {
		err = c.err(err)
		c.end()
		c.close()
		return nil, err
	}
	// The request goes into c.out; the first read of the answer sends it (sendAndRead).
	if err := writeRequest(c.bw, req); err != nil {
		c.out.b = c.out.b[:0]
		return fail(err)
	}
	var res *http.Response
	var fast bool
	for n := 0; ; n++ {
		var err error
		res, fast, err = readHead(c.br, req)
		if err != nil {
			return fail(err)
		}
		if res.StatusCode >= 200 {
			break
		}
		if res.StatusCode == http.StatusSwitchingProtocols {
			return fail(errors.New("hop: the cell switched protocols on a request without Upgrade"))
		}
		// Other 1xx answers are informational; the final answer follows. As http.Transport,
		// give up after a few.
		if n == max1xx {
			return fail(errors.New("hop: too many 1xx informational answers"))
		}
	}
	c.headerLimit = 0
	if !c.gotHeaders() {
		return fail(os.ErrDeadlineExceeded)
	}
	keep := !res.Close && !req.Close
	if fast && res.ContentLength == 0 {
		res.Body = http.NoBody // as net/http answers an empty body
	}
	if res.Body == http.NoBody {
		c.release(keep)
		return res, nil
	}
	b := &body{c: c, rc: res.Body, keep: keep}
	if fast {
		b.remain = res.ContentLength // read from c.br by body.Read itself
	}
	res.Body = b
	return res, nil
}

// release ends a round trip: the connection goes back to the pool when its response was read
// to the end with nothing after it, the cell keeps it open and the watchdog did not end it;
// else it is closed. (Bytes a misbehaving cell sends later, while the connection is idle, would
// be read as the next request's answer; cells are net/http servers, which do not.)
func (c *conn) release(keep bool) {
	if c.end() && keep && c.br.Buffered() == 0 {
		c.t.put(c)
		return
	}
	c.close()
}

// body is a response body; it hands the connection back when read to its end.
type body struct {
	c *conn
	// rc is net/http's body of an answer http.ReadResponse parsed; nil for an answer readHead
	// parsed itself, whose remain bytes body reads from c.br.
	rc     io.ReadCloser
	remain int64
	keep   bool
	done   atomic.Bool
	err    error // the error that ended reading (io.EOF at the end), returned again after it
}

var errBodyClosed = errors.New("hop: read on closed response body")

func (b *body) Read(p []byte) (int, error) {
	if b.done.Load() {
		if b.err != nil {
			return 0, b.err
		}
		return 0, errBodyClosed
	}
	var n int
	var err error
	if b.rc != nil {
		n, err = b.rc.Read(p)
	} else {
		n, err = b.readBuffered(p)
	}
	if err != nil {
		if err != io.EOF {
			err = b.c.err(err)
		}
		if b.done.CompareAndSwap(false, true) {
			b.err = err
			// At io.EOF the whole response was read and the connection may be reused. The
			// underlying body is not closed: that would read from a connection another
			// request may already be using.
			b.c.release(b.keep && err == io.EOF)
		}
	}
	return n, err
}

// readBuffered reads the rest of a Content-Length body from the connection's reader, as
// net/http's body does: io.EOF with its last bytes, io.ErrUnexpectedEOF when the connection
// ends before them.
func (b *body) readBuffered(p []byte) (int, error) {
	if b.remain == 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > b.remain {
		p = p[:b.remain]
	}
	n, err := b.c.br.Read(p)
	b.remain -= int64(n)
	switch {
	case err == io.EOF:
		err = io.ErrUnexpectedEOF
	case err == nil && b.remain == 0:
		err = io.EOF
	}
	return n, err
}

// Close closes the body. Closed before its end, the connection still holds part of the
// response and is closed too.
func (b *body) Close() error {
	if b.done.CompareAndSwap(false, true) {
		b.c.end()
		b.c.close()
	}
	return nil
}

// writeRequest writes a request without a body in HTTP/1.1 wire format and flushes it. It
// writes what http.Transport would, validated as http.Transport validates it, minus User-Agent
// when it is empty (as the ReverseProxy asks with an empty value), with the request's own
// headers in map order. Nothing is written when anything is invalid.
func writeRequest(w *bufio.Writer, req *http.Request) error {
	host := req.Host
	if host == "" {
		host = req.URL.Host
	}
	method := req.Method
	if method == "" {
		method = http.MethodGet
	}
	uri := req.URL.RequestURI()
	if !httpguts.ValidHostHeader(host) || host == "" {
		return fmt.Errorf("hop: invalid Host %q", host)
	}
	// A method is a token, as a field name is (httpguts checks both the same way).
	if !validURI(uri) || !httpguts.ValidHeaderFieldName(method) {
		return errors.New("hop: invalid request line")
	}
	for k, vs := range req.Header {
		if !httpguts.ValidHeaderFieldName(k) {
			return fmt.Errorf("hop: invalid header field name %q", k)
		}
		for _, v := range vs {
			if !httpguts.ValidHeaderFieldValue(v) {
				return fmt.Errorf("hop: invalid header field value for %q", k)
			}
		}
	}
	w.WriteString(method)
	w.WriteByte(' ')
	w.WriteString(uri)
	w.WriteString(" HTTP/1.1\r\nHost: ")
	w.WriteString(host)
	w.WriteString("\r\n")
	for k, vs := range req.Header {
		if ownedHeader(k) {
			continue
		}
		for _, v := range vs {
			if k == "User-Agent" && v == "" {
				continue
			}
			w.WriteString(k)
			w.WriteString(": ")
			w.WriteString(v)
			w.WriteString("\r\n")
		}
	}
	// As http.Transport: an empty body is announced except on GET and HEAD.
	if method != http.MethodGet && method != http.MethodHead {
		w.WriteString("Content-Length: 0\r\n")
	}
	if req.Close {
		w.WriteString("Connection: close\r\n")
	}
	w.WriteString("\r\n")
	return w.Flush()
}

// ownedHeader reports whether k names a header the writer sets itself (Host, the framing
// headers, Connection), in any case: a map key "content-length" or "host" that is not in
// canonical form must not reach the cell as a second, conflicting header (found by
// FuzzWriteRequest; net/http's server canonicalises keys, other callers need not).
func ownedHeader(k string) bool {
	var owned string
	switch len(k) {
	case 4:
		owned = "Host"
	case 7:
		owned = "Trailer"
	case 10:
		owned = "Connection"
	case 14:
		owned = "Content-Length"
	case 17:
		owned = "Transfer-Encoding"
	default:
		return false
	}
	return k == owned || strings.EqualFold(k, owned)
}

// validURI reports whether s may be sent as a request target: not empty, no spaces or
// control characters.
func validURI(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] == 0x7f {
			return false
		}
	}
	return true
}
