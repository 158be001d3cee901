package h1

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// TestBodyClosedWhenHandlerReturns: a request body read after the handler returned (what an
// http.RoundTripper may do: net/http's Transport writes a request body on a goroutine of its
// own, which can outlive the round trip when the upstream answers first) must fail, as with
// net/http's server, not read the connection's buffer, which is the next request's, or, once
// the connection is closed, another connection's from the pool (or nil: a panic).
func TestBodyClosedWhenHandlerReturns(t *testing.T) {
	bodies := make(chan io.ReadCloser, 1)
	_, addr, _ := startH1(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		bodies <- r.Body
		_, _ = io.WriteString(w, "early")
	}), nil)

	c := dial(t, addr)
	// More body than the loop discards after the handler: the connection closes after the answer.
	c.send("POST / HTTP/1.1\r\nHost: example.com\r\nContent-Length: 1048576\r\n\r\n0123456789")
	if _, body := c.mustRead("POST"); body != "early" {
		t.Fatalf("answer %q", body)
	}
	late := wait(t, bodies, "request body")
	c.waitClosed()

	var n int
	var err error
	func() {
		defer func() {
			if p := recover(); p != nil {
				t.Fatalf("a late read of the body panicked: %v", p)
			}
		}()
		n, err = late.Read(make([]byte, 64))
	}()
	if n != 0 || !errors.Is(err, http.ErrBodyReadAfterClose) {
		t.Fatalf("a read after the handler returned gave %d bytes, %v; want 0, %v", n, err, http.ErrBodyReadAfterClose)
	}
}

// TestUnreadBodyMustArrive: a body the handler left unread is read off the connection after the
// answer (to keep it), but a client that declared more than it sends must not hold the
// connection and its goroutine for ever: the rest must come within ReadHeaderTimeout, like a
// head, whether or not the handler had put a read deadline of its own (the body-rate rule's).
func TestUnreadBodyMustArrive(t *testing.T) {
	for _, deadline := range []bool{false, true} {
		_, addr, _ := startH1(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if deadline {
				_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(time.Millisecond))
			}
			_, _ = io.WriteString(w, "no thanks")
		}), func(s *Server) { s.ReadHeaderTimeout = 300 * time.Millisecond })

		c := dial(t, addr)
		c.send("POST / HTTP/1.1\r\nHost: example.com\r\nContent-Length: 1000\r\n\r\n0123456789")
		if _, body := c.mustRead("POST"); body != "no thanks" {
			t.Fatalf("answer %q", body)
		}
		if b := c.waitClosed(); len(b) != 0 {
			t.Fatalf("deadline %v: after the answer: %q", deadline, b)
		}
	}
}

// TestStaleReadDeadline: a read deadline left on the connection by a request's handler (the
// body-rate rule's, which a transport's goroutine can set as the handler returns) must not cut
// the keep-alive connection later: net/http's server sets the read deadline anew for every
// request, and the loop's waits have none of their own (the sweep times them).
func TestStaleReadDeadline(t *testing.T) {
	_, addr, _ := startH1(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/leave" {
			_ = http.NewResponseController(w).SetReadDeadline(time.Unix(1, 0))
		}
		_, _ = io.WriteString(w, r.URL.Path)
	}), nil)

	c := dial(t, addr)
	c.send("GET /leave HTTP/1.1\r\nHost: example.com\r\n\r\n")
	if _, body := c.mustRead("GET"); body != "/leave" {
		t.Fatalf("first answer %q", body)
	}
	c.send("GET /next HTTP/1.1\r\nHost: example.com\r\n\r\n")
	if _, body := c.mustRead("GET"); body != "/next" {
		t.Fatalf("second answer %q", body)
	}
}

// TestHeadAfterBodyTimesOut: the head of a request that follows one with a body must arrive
// within ReadHeaderTimeout too, even when its first bytes came with that body (the connection
// is not left as busy, which only a hang-up ends).
func TestHeadAfterBodyTimesOut(t *testing.T) {
	_, addr, _ := startH1(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(w, r.Body)
	}), func(s *Server) { s.ReadHeaderTimeout = 300 * time.Millisecond })
	c := dial(t, addr)
	c.send("POST / HTTP/1.1\r\nHost: example.com\r\nContent-Length: 5\r\n\r\nhelloGET / HTTP/1.1\r\n")
	c.mustRead("POST")
	if b := c.waitClosed(); len(b) != 0 {
		t.Fatalf("after the answer: %q", b)
	}
}

// TestAcceptedDuringShutdown: a connection accepted just before Shutdown closed the listener,
// but not yet registered when Shutdown looked for connections, must not be served after
// Shutdown returned, unwatched by the sweep (net/http's Shutdown waits for its Serve loops).
func TestAcceptedDuringShutdown(t *testing.T) {
	entered, proceed := make(chan struct{}), make(chan struct{})
	s, addr, serveErr := startH1(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "served")
	}), func(s *Server) {
		s.ReadHeaderTimeout = 300 * time.Millisecond
		s.WrapConn = func(nc net.Conn) net.Conn {
			close(entered) // one connection only
			<-proceed
			return nc
		}
	})
	c := dial(t, addr)
	wait(t, entered, "the accept")
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	close(proceed)
	c.send(get)
	if b := c.waitClosed(); len(b) != 0 {
		t.Fatalf("a connection accepted before Shutdown was served after it: %q", b)
	}
	if err := wait(t, serveErr, "Serve's return"); !errors.Is(err, http.ErrServerClosed) {
		t.Fatalf("Serve returned %v", err)
	}
}

// TestTimeoutsAfterShutdownDeadline: when Shutdown gives up (its context ends), the connections
// left are still under the server's timeouts, as net/http's keep their deadlines: a head that
// never ends is still cut.
func TestTimeoutsAfterShutdownDeadline(t *testing.T) {
	s, addr, _ := startH1(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}),
		func(s *Server) { s.ReadHeaderTimeout = 300 * time.Millisecond })
	c := dial(t, addr)
	c.send("GET / HTTP/1.1\r\n")
	eventually(t, "the connection registered", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.conns) == 1
	})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Shutdown(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Shutdown returned %v, want context.Canceled", err)
	}
	if b := c.waitClosed(); len(b) != 0 {
		t.Fatalf("the cut head was answered %q", b)
	}
}

// TestPanicWhileBodyRead: a handler that panics while a goroutine of its own waits on the body
// (the client sends no more of it) has its connection closed at once, as net/http's server
// does, not once the client sends more.
func TestPanicWhileBodyRead(t *testing.T) {
	reading := make(chan struct{})
	_, addr, _ := startH1(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		go func() {
			close(reading)
			_, _ = io.Copy(io.Discard, r.Body)
		}()
		<-reading
		panic(http.ErrAbortHandler)
	}), nil)
	c := dial(t, addr)
	c.send("POST / HTTP/1.1\r\nHost: example.com\r\nContent-Length: 1000\r\n\r\nhalf")
	c.waitClosed()
}
