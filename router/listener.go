package router

import (
	"errors"
	"io"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"time"

	"slidecells/router/internal/rawio"
)

// quietConn is a client connection of the public listener (router/h1 wraps every accepted
// connection in one; its loop writes through it, and reads raw itself in its raw mode). On a
// connection handed to net/http's server: while a handler runs, net/http's server keeps a
// one-byte read pending on the connection (its "background read") so that it
// notices a client that hangs up; it starts that read right after clearing the read deadline
// (SetReadDeadline with the zero time) and ends it with a deadline in the past when the
// handler returns. net.Conn.Read tries the read system call first, which on nearly every
// request fails with EAGAIN (the client is waiting for its answer, not sending), and only
// then waits for the poller. quietConn waits first: a one-byte read that directly follows
// SetReadDeadline(zero) goes through RawConn.Read with its first attempt skipped, saving one
// system call per request.
//
// What it gives up: the poller reports readiness only when it changes (edge-triggered), and
// waiting resets what it saw before. Bytes or a hang-up that arrived in the moments between
// the end of the request and the start of the wait are not seen until the handler ends and the
// server reads again (as it does anyway): for that request the client's hang-up is noticed when
// the answer is written, as it was before net/http had the background read; pipelined bytes
// are never lost. Every other read (the request itself, bodies, TLS records, hijacked
// connections) tries the read first, as net.Conn.Read does.
//
// All reads and writes (larger writes in pieces of rawio.MaxWrite) are raw system calls
// through RawConn (package rawio says why), with net.Conn's semantics: deadlines, EOF, errors
// as *net.OpError.
//
// The send timeout: a write that waits for room in the socket's buffer for sendTimeout while
// the client takes less than minSendProgress bytes of the answer fails with a timeout (the
// client stopped reading, or reads slower than about one proxy write, 32 KiB, per
// sendTimeout), and the server then closes the connection. Without it a client that asks for
// a large answer and never reads would hold the connection, its goroutine, the request's place
// among the cell's requests in flight and the cell's own connection for ever. The deadline is
// set only once a write finds the buffer full, so a write the socket takes at once (nearly all
// of them) costs nothing more.
//
// Why the progress check: the kernel wakes a writer waiting for room only once a third of the
// socket's send buffer is free again, and that buffer grows to megabytes (autotuning,
// net.ipv4.tcp_wmem), so a deadline on the wait alone would cut a client that reads steadily
// at tens of KiB/s (4 MiB / 3 per 30 s). When the deadline passes, the bytes the client
// acknowledged meanwhile (written minus the send queue, rawio.Queued) decide: at least
// minSendProgress and the wait goes on for another sendTimeout.
type quietConn struct {
	net.Conn
	rc          syscall.RawConn
	sendTimeout time.Duration
	// armed: SetReadDeadline(zero) came last, so a one-byte read now is the background read.
	// The background read runs on a goroutine of its own; the handler ends it with
	// SetReadDeadline, hence the atomic.
	armed atomic.Bool

	// State of the raw read in flight (one at a time, as net/http reads) and of the raw
	// write in flight (one at a time, as net/http writes); a read and a write may overlap.
	readFn   func(uintptr) bool
	waited   bool
	p        []byte
	n        int
	readErr  error
	writeFn  func(uintptr) bool
	wp       []byte
	wn       int
	writeErr error
	blocked  bool // the write in flight found the socket's buffer full and set the deadline

	sent int64 // bytes the socket took from our writes, all told
	mark int64 // sent minus the send queue when the send deadline was set; -1: unknown
}

// minSendProgress is what a client must take of its answer per sendTimeout while the router
// waits to write more: the proxy's copy buffer, one write of a large answer.
const minSendProgress = copyBufferSize

// newQuietConn wraps c (a TCP connection) with the send timeout (see quietConn).
func newQuietConn(c net.Conn, sendTimeout time.Duration) net.Conn {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return c
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return c
	}
	q := &quietConn{Conn: c, rc: rc, sendTimeout: sendTimeout}
	q.readFn, q.writeFn = q.rawRead, q.rawWrite
	return q
}

func (c *quietConn) SetReadDeadline(t time.Time) error {
	c.armed.Store(t.IsZero())
	return c.Conn.SetReadDeadline(t)
}

func (c *quietConn) SetDeadline(t time.Time) error {
	c.armed.Store(false)
	return c.Conn.SetDeadline(t)
}

// Read reads through the raw connection (rawio: no scheduler bookkeeping); the background
// read waits before its first try.
func (c *quietConn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	// Armed and one byte: the background read; wait first.
	c.waited = !(c.armed.Swap(false) && len(p) == 1)
	c.p, c.n, c.readErr = p, 0, nil
	err := c.rc.Read(c.readFn)
	c.p = nil
	if err != nil {
		return 0, opName(err, "read") // the deadline that ends the background read, or a close
	}
	return c.n, c.readErr
}

// rawRead is the RawConn.Read callback: unless waited, the first call only asks to wait.
func (c *quietConn) rawRead(fd uintptr) bool {
	if !c.waited {
		c.waited = true
		return false
	}
	n, err := rawio.Read(fd, c.p)
	switch {
	case err == syscall.EAGAIN:
		return false
	case err != nil:
		c.readErr = &net.OpError{Op: "read", Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: os.NewSyscallError("read", err)}
	case n == 0:
		c.readErr = io.EOF
	default:
		c.n = n
	}
	return true
}

// Write writes through the raw connection (rawio), waiting for room when the socket's buffer
// is full, at most sendTimeout per piece of rawio.MaxWrite unless the client keeps taking
// minSendProgress per sendTimeout (progressed).
func (c *quietConn) Write(p []byte) (int, error) {
	done := 0
	for done < len(p) {
		n, err := c.writePiece(p[done:min(done+rawio.MaxWrite, len(p))])
		done += n
		if err != nil {
			return done, err
		}
	}
	return done, nil
}

// writePiece writes p (at most rawio.MaxWrite bytes) raw.
func (c *quietConn) writePiece(p []byte) (int, error) {
	c.wp, c.wn, c.writeErr, c.blocked = p, 0, nil, false
	err := c.rc.Write(c.writeFn)
	for err != nil && c.blocked && c.progressed(err) {
		err = c.rc.Write(c.writeFn)
	}
	n := c.wn
	c.wp = nil
	if c.blocked {
		_ = c.Conn.SetWriteDeadline(time.Time{})
	}
	if err != nil {
		return n, opName(err, "write")
	}
	return n, c.writeErr
}

// progressed reports whether err is the send deadline passing while the client took at least
// minSendProgress bytes since it was set; if so it sets the next one, sendTimeout from now.
func (c *quietConn) progressed(err error) bool {
	if !errors.Is(err, os.ErrDeadlineExceeded) || c.mark < 0 {
		return false
	}
	now := c.acked()
	if now < 0 || now-c.mark < minSendProgress {
		return false
	}
	c.mark = now
	return c.Conn.SetWriteDeadline(time.Now().Add(c.sendTimeout)) == nil
}

// acked is how much of what was written the client acknowledged (sent minus the send queue);
// -1 when that cannot be told.
func (c *quietConn) acked() int64 {
	n := int64(-1)
	if err := c.rc.Control(func(fd uintptr) { n = c.ackedFd(fd) }); err != nil {
		return -1
	}
	return n
}

func (c *quietConn) ackedFd(fd uintptr) int64 {
	q, err := rawio.Queued(fd)
	if err != nil {
		return -1
	}
	return c.sent - int64(q)
}

// rawWrite is the RawConn.Write callback. The first time the socket's buffer is full it sets
// the write deadline (sendTimeout from now) that the wait for room then keeps, and notes what
// the client has acknowledged so far (progressed); Write clears it.
// (SetWriteDeadline only takes a reference on the descriptor, never its write lock, which
// RawConn.Write holds here.)
func (c *quietConn) rawWrite(fd uintptr) bool {
	n, err := rawio.Write(fd, c.wp[c.wn:])
	c.wn += n
	c.sent += int64(n)
	switch {
	case err == syscall.EAGAIN:
		if !c.blocked {
			c.blocked = true
			c.mark = c.ackedFd(fd)
			_ = c.Conn.SetWriteDeadline(time.Now().Add(c.sendTimeout))
		}
		return false
	case err != nil:
		c.writeErr = &net.OpError{Op: "write", Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: os.NewSyscallError("write", err)}
	}
	return true
}

// opName gives a RawConn error (a *net.OpError "raw-read" or "raw-write") the operation name
// net.Conn's own errors have, which net/http's server looks at.
func opName(err error, op string) error {
	var oe *net.OpError
	if errors.As(err, &oe) {
		oe.Op = op
	}
	return err
}

// CloseWrite half-closes the connection, as net/http's server does before it closes one it
// answered with an error (so that the client reads the answer rather than a reset).
func (c *quietConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
