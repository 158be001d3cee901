package router

import (
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"time"

	"slidecells/router/internal/rawio"
)

// quietListener hands out quietConns: connections that read and write with raw system calls,
// give the socket a read deadline only when a read needs it, and whose net/http background
// read costs nothing when the handler answers within parkFor.
type quietListener struct{ net.Listener }

func (l quietListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return newQuietConn(c), nil
}

// quietConn is a client connection of the public listener, shaped for what net/http's
// server does around every request on a keep-alive connection:
//
//   - It sets the read deadline five or six times (idle timeout, header timeout, none for the
//     body, none before its background read, one in the past to end it, none again). Each is
//     a trip through the runtime's poller and its timers. quietConn only records a deadline
//     and gives it to the socket when a read actually reaches the socket (or at once while one
//     is there), which on a keep-alive connection is about once per request.
//   - While the handler runs, it keeps a one-byte read pending (its "background read") to
//     notice a client that hangs up, and ends it with a deadline in the past when the handler
//     returns. For a fast answer, that is a poller wait and a wake-up (and, on a plain
//     net.Conn, a read system call that fails with EAGAIN) for nothing. quietConn parks that
//     read (a one-byte read right after the read deadline was cleared) for up to parkFor
//     without touching the socket: a deadline in the past set meanwhile ends it at once with
//     the timeout net/http expects; after parkFor (a time.AfterFunc, no goroutine per
//     request) it reads the socket as any read does.
//
// The trade-off: a client that hangs up while its request is handled is noticed up to parkFor
// later (its request context is canceled then, not at once). Bytes a client pipelines behind
// its request stay in the socket for the server's next read; nothing is lost.
//
// All reads and writes (up to rawio.MaxWrite) are raw system calls through RawConn (package
// rawio says why), with net.Conn's semantics: deadlines, EOF, errors as *net.OpError.
type quietConn struct {
	net.Conn
	rc syscall.RawConn

	// mu guards the read deadline and the parked read: net/http ends its background read
	// from the handler's goroutine.
	mu       sync.Mutex
	deadline time.Time // the read deadline asked for
	applied  time.Time // the read deadline the socket has
	reading  bool      // a read is at the socket: a new deadline goes to the socket at once
	armed    bool      // the deadline was just cleared: a one-byte read now is the background read
	parked   bool      // the background read waits in park
	closed   bool
	wake     chan struct{} // ends a park; one slot
	// timer ends a park no later than parkFor after it began. It is made at the first park
	// and set again only when it is not pending (timerSet): a timer set for an earlier park
	// fires sooner, ending that park early, which costs only that request its saving; setting
	// the timer for every park would cost as much as the deadline changes it saves.
	timer    *time.Timer
	timerSet bool
	parkFor  time.Duration // parkFor; tests park longer

	// State of the raw read in flight (one at a time, as net/http reads) and of the raw
	// write in flight (one at a time, as net/http writes); a read and a write may overlap.
	readFn   func(uintptr) bool
	p        []byte
	n        int
	readErr  error
	writeFn  func(uintptr) bool
	wp       []byte
	wn       int
	writeErr error
}

// parkFor is how long net/http's background read waits before it reads the socket: how late,
// at most, a client's hang-up during a request is noticed.
const parkFor = 50 * time.Millisecond

// errParkedDeadline is what a parked read ended by a deadline in the past returns: net/http
// checks that it is a net.Error and a timeout, and drops it.
var errParkedDeadline = &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}

func newQuietConn(c net.Conn) net.Conn {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return c
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return c
	}
	q := &quietConn{Conn: c, rc: rc, wake: make(chan struct{}, 1), parkFor: parkFor}
	q.readFn, q.writeFn = q.rawRead, q.rawWrite
	return q
}

// SetReadDeadline records t; the socket gets it at the next read, or now while a read is
// there. It ends a parked read.
func (c *quietConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.armed = t.IsZero()
	return c.setReadDeadlineLocked(t)
}

func (c *quietConn) SetDeadline(t time.Time) error {
	c.mu.Lock()
	c.armed = false
	err := c.setReadDeadlineLocked(t)
	c.mu.Unlock()
	if err != nil {
		return err
	}
	return c.Conn.SetWriteDeadline(t)
}

func (c *quietConn) setReadDeadlineLocked(t time.Time) error {
	c.deadline = t
	c.unparkLocked()
	if !c.reading {
		return nil
	}
	c.applied = t
	return c.Conn.SetReadDeadline(t)
}

// Close closes the connection and ends a parked read, which then reads the closed socket.
func (c *quietConn) Close() error {
	c.mu.Lock()
	c.closed = true
	c.unparkLocked()
	c.mu.Unlock()
	return c.Conn.Close()
}

// Read reads through the raw connection (rawio: no scheduler bookkeeping) after giving the
// socket the read deadline; the background read parks first.
func (c *quietConn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	c.mu.Lock()
	if c.armed && len(p) == 1 && !c.closed {
		c.park()
		if c.expiredLocked() {
			c.mu.Unlock()
			return 0, errParkedDeadline
		}
	}
	c.armed = false
	if !c.deadline.Equal(c.applied) {
		if err := c.Conn.SetReadDeadline(c.deadline); err != nil {
			c.mu.Unlock()
			return 0, err
		}
		c.applied = c.deadline
	}
	c.reading = true
	c.mu.Unlock()

	c.p, c.n, c.readErr = p, 0, nil
	err := c.rc.Read(c.readFn)
	c.p = nil

	c.mu.Lock()
	c.reading = false
	c.mu.Unlock()
	if err != nil {
		return 0, opName(err, "read") // a deadline, or a close
	}
	return c.n, c.readErr
}

// expiredLocked reports whether the read deadline has passed. The deadline net/http ends its
// background read with lies decades in the past: telling that needs no clock read.
func (c *quietConn) expiredLocked() bool {
	switch {
	case c.deadline.IsZero():
		return false
	case c.deadline.Before(longAgo):
		return true
	}
	return !c.deadline.After(time.Now())
}

// longAgo is a time every deadline set before it has certainly passed.
var longAgo = time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)

// park waits, c.mu held (and released while waiting), until parkFor has passed, the read
// deadline changed or the connection was closed.
func (c *quietConn) park() {
	select {
	case <-c.wake: // a wake-up left over from the previous park
	default:
	}
	c.parked = true
	switch {
	case c.timer == nil:
		c.timer = time.AfterFunc(c.parkFor, c.timerFired)
		c.timerSet = true
	case !c.timerSet:
		c.timer.Reset(c.parkFor)
		c.timerSet = true
	}
	c.mu.Unlock()
	<-c.wake
	c.mu.Lock()
	c.parked = false
}

// timerFired ends the park under way, if any.
func (c *quietConn) timerFired() {
	c.mu.Lock()
	c.timerSet = false
	c.unparkLocked()
	c.mu.Unlock()
}

func (c *quietConn) unparkLocked() {
	if c.parked {
		select {
		case c.wake <- struct{}{}:
		default:
		}
	}
}

// rawRead is the RawConn.Read callback.
func (c *quietConn) rawRead(fd uintptr) bool {
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
// is full; writes larger than rawio.MaxWrite go through net.Conn.
func (c *quietConn) Write(p []byte) (int, error) {
	if len(p) > rawio.MaxWrite {
		return c.Conn.Write(p)
	}
	c.wp, c.wn, c.writeErr = p, 0, nil
	err := c.rc.Write(c.writeFn)
	n := c.wn
	c.wp = nil
	if err != nil {
		return n, opName(err, "write")
	}
	return n, c.writeErr
}

// rawWrite is the RawConn.Write callback.
func (c *quietConn) rawWrite(fd uintptr) bool {
	n, err := rawio.Write(fd, c.wp[c.wn:])
	c.wn += n
	switch {
	case err == syscall.EAGAIN:
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
