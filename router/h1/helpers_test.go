package h1

import (
	"bufio"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"testing"
	"time"
)

// hung is how long a test waits for something that must happen before it calls the server
// hung: a bound on a wait, never a measure.
const hung = 20 * time.Second

var quietLog = log.New(io.Discard, "", 0)

// startH1 serves h with an h1.Server on a fresh 127.0.0.1 listener; set, when not nil, sets
// the server's fields first. The server is closed when the test ends; serveErr receives what
// Serve returned.
func startH1(t testing.TB, h http.Handler, set func(*Server)) (s *Server, addr string, serveErr <-chan error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s = &Server{Handler: h, ErrorLog: quietLog}
	if set != nil {
		set(s)
	}
	// Before Serve's goroutine: tests read s.conns, s.sem and s.handed (busyConns, TestMaxConns)
	// and would otherwise race with init when they poll before that goroutine runs.
	s.init()
	errc := make(chan error, 1)
	go func() { errc <- s.Serve(ln) }()
	t.Cleanup(func() { _ = s.Close() })
	return s, ln.Addr().String(), errc
}

// startStd serves h with a plain net/http server, the reference the loop is held to.
func startStd(t testing.TB, h http.Handler, set func(*http.Server)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &http.Server{Handler: h, ErrorLog: quietLog}
	if set != nil {
		set(s)
	}
	go func() { _ = s.Serve(ln) }()
	t.Cleanup(func() { _ = s.Close() })
	return ln.Addr().String()
}

// client is a raw connection with a reader for the answers.
type client struct {
	t  *testing.T
	nc net.Conn
	br *bufio.Reader
}

func dial(t *testing.T, addr string) *client {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nc.Close() })
	_ = nc.SetDeadline(time.Now().Add(hung))
	return &client{t: t, nc: nc, br: bufio.NewReader(nc)}
}

func (c *client) send(raw string) {
	c.t.Helper()
	if _, err := io.WriteString(c.nc, raw); err != nil {
		c.t.Fatalf("writing the request: %v", err)
	}
}

// read reads one answer (1xx included) to a request of the given method, body and all.
func (c *client) read(method string) (*http.Response, []byte, error) {
	resp, err := http.ReadResponse(c.br, &http.Request{Method: method})
	if err != nil {
		return nil, nil, err
	}
	b, err := io.ReadAll(resp.Body)
	return resp, b, err
}

// mustRead is read for an answer that must come whole.
// readAsync reads the answer to method in the background; the channel gets its body, or the
// error's text.
func (c *client) readAsync(method string) <-chan string {
	answered := make(chan string, 1)
	go func() {
		_, b, err := c.read(method)
		if err != nil {
			answered <- err.Error()
			return
		}
		answered <- string(b)
	}()
	return answered
}

func (c *client) mustRead(method string) (*http.Response, string) {
	c.t.Helper()
	resp, b, err := c.read(method)
	if err != nil {
		c.t.Fatalf("reading the answer: %v", err)
	}
	return resp, string(b)
}

// waitClosed waits until the server closes the connection (a read ends in EOF or a reset,
// not a timeout); whatever bytes came before are returned.
func (c *client) waitClosed() []byte {
	c.t.Helper()
	b, err := io.ReadAll(c.br)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		c.t.Fatalf("the server did not close the connection within %v", hung)
	}
	return b
}

// wait receives from ch, failing the test if nothing comes within hung.
func wait[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(hung):
		t.Fatalf("no %s within %v", what, hung)
		panic("unreachable")
	}
}

// eventually polls cond until it holds, failing the test after hung.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(hung)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, hung)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
