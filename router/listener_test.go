package router

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// publicServer serves h as the router binary does.
func publicServer(t *testing.T, h http.Handler) string {
	t.Helper()
	return startPublic(t, h, ServerConfig{}).Listener.Addr().String()
}

func TestPublicListenerConnectionsAreQuiet(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		if c, err := net.Dial("tcp", ln.Addr().String()); err == nil {
			defer c.Close()
			_, _ = io.Copy(io.Discard, c)
		}
	}()
	c, err := ln.Accept()
	if err == nil {
		c = newQuietConn(c, DefaultSendTimeout)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, ok := c.(*quietConn); !ok {
		t.Fatalf("accepted %T, want *quietConn", c)
	}
}

func TestBackgroundReadStillSeesAClientHangUp(t *testing.T) {
	entered := make(chan struct{}, 1)
	canceled := make(chan struct{}, 1)
	addr := publicServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		select {
		case <-r.Context().Done():
			canceled <- struct{}{}
		case <-time.After(10 * time.Second):
		}
	}))
	// The hang-up is seen when it comes after the background read began waiting, which is
	// what a client that gives up on a slow answer does; a few tries rule out a hang-up that
	// raced the start of the wait (quietConn's documented blind spot).
	for try := 1; ; try++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(c, "GET /slow HTTP/1.1\r\nHost: router\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		<-entered
		time.Sleep(50 * time.Millisecond)
		c.Close()
		select {
		case <-canceled:
			return
		case <-time.After(10 * time.Second):
			if try == 3 {
				t.Fatal("the handler's context was not canceled when the client hung up")
			}
		}
	}
}

func TestPipelinedRequestsAreAnsweredInOrder(t *testing.T) {
	addr := publicServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, r.URL.Path)
	}))
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	paths := []string{"/one", "/two", "/three"}
	var reqs strings.Builder
	for _, p := range paths {
		reqs.WriteString("GET " + p + " HTTP/1.1\r\nHost: router\r\n\r\n")
	}
	if _, err := io.WriteString(c, reqs.String()); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	for _, p := range paths {
		res, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("answer to %s: %v", p, err)
		}
		b, err := io.ReadAll(res.Body)
		res.Body.Close()
		if err != nil || string(b) != p {
			t.Fatalf("answer to %s: %q, %v", p, b, err)
		}
	}
}

func TestQuietConnReadsEOFAndErrors(t *testing.T) {
	server, client := tcpPair(t)
	q := newQuietConn(server, DefaultSendTimeout).(*quietConn)
	if _, err := io.WriteString(client, "x"); err != nil {
		t.Fatal(err)
	}
	// Armed, one byte: the quiet path. The byte was sent before the wait began, so only the
	// deadline ends it, with a timeout and nothing read; the byte stays for the next read.
	_ = q.SetReadDeadline(time.Time{})
	time.Sleep(20 * time.Millisecond)
	go func() {
		time.Sleep(50 * time.Millisecond)
		_ = q.SetReadDeadline(time.Unix(1, 0))
	}()
	b := make([]byte, 1)
	n, err := q.Read(b)
	var ne net.Error
	if n != 0 || !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("quiet read = %d, %v; want 0 and a timeout", n, err)
	}
	_ = q.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := q.Read(b); n != 1 || err != nil || b[0] != 'x' {
		t.Fatalf("next read = %d %q, %v; want the byte", n, b[:n], err)
	}
	// A quiet read that sees nothing is ended after 10 s, failing the test rather than hanging.
	unblock := func() *time.Timer {
		return time.AfterFunc(10*time.Second, func() { _ = q.Conn.SetReadDeadline(time.Unix(1, 0)) })
	}
	// Armed again, and the client sends after the wait began: read.
	_ = q.SetReadDeadline(time.Time{})
	stop := unblock()
	go func() {
		time.Sleep(200 * time.Millisecond)
		_, _ = io.WriteString(client, "y")
	}()
	if n, err := q.Read(b); n != 1 || err != nil || b[0] != 'y' {
		t.Fatalf("quiet read = %d %q, %v; want y", n, b[:n], err)
	}
	stop.Stop()
	// And a hang-up is io.EOF.
	_ = q.SetReadDeadline(time.Time{})
	stop = unblock()
	defer stop.Stop()
	go func() {
		time.Sleep(200 * time.Millisecond)
		client.Close()
	}()
	if n, err := q.Read(b); n != 0 || err != io.EOF {
		t.Fatalf("quiet read after hang-up = %d, %v; want io.EOF", n, err)
	}
}

// tcpPair is a connected pair of loopback TCP connections.
func tcpPair(t *testing.T) (server, client net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server, err = ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { server.Close(); client.Close() })
	return server, client
}
