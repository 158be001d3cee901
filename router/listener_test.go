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

// publicServer serves h as the router binary does: NewPublicServer on LimitListener.
func publicServer(t *testing.T, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := NewPublicServer(h, ServerConfig{})
	go func() { _ = srv.Serve(LimitListener(ln, ServerConfig{})) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
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
	c, err := quietListener{ln}.Accept()
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
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(c, "GET /slow HTTP/1.1\r\nHost: router\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	<-entered
	// Whether the hang-up comes while the background read is parked or after it reached the
	// socket, it is seen: the read after the park tries the socket first.
	c.Close()
	hungUp := time.Now()
	select {
	case <-canceled:
		t.Logf("the hang-up was noticed after %v (parkFor is %v)", time.Since(hungUp), parkFor)
	case <-time.After(10 * time.Second):
		t.Fatal("the handler's context was not canceled when the client hung up")
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

// TestQuietConnDeadlines: read deadlines are given to the socket only when a read needs them,
// still end reads, and end net/http's parked background read at once without reading; a
// parked read reads the socket after parkFor: a byte, a hang-up, a closed connection.
func TestQuietConnDeadlines(t *testing.T) {
	server, client := tcpPair(t)
	q := newQuietConn(server).(*quietConn)
	wantTimeout := func(what string, n int, err error) {
		t.Helper()
		var ne net.Error
		if n != 0 || !errors.As(err, &ne) || !ne.Timeout() {
			t.Fatalf("%s = %d, %v; want 0 and a timeout", what, n, err)
		}
	}
	buf := make([]byte, 64)

	// Lazy: a deadline no read needs never reaches the socket; the next read takes it there.
	soon := time.Now().Add(100 * time.Millisecond)
	_ = q.SetReadDeadline(soon)
	if !q.applied.IsZero() {
		t.Fatalf("the socket got the deadline %v before any read", q.applied)
	}
	n, err := q.Read(buf)
	wantTimeout("read past its deadline", n, err)
	if !q.applied.Equal(soon) {
		t.Fatalf("the socket's deadline is %v, want %v", q.applied, soon)
	}

	// A read already at the socket is ended by a deadline set meanwhile.
	_ = q.SetReadDeadline(time.Time{})
	go func() {
		for {
			q.mu.Lock()
			reading := q.reading
			q.mu.Unlock()
			if reading {
				_ = q.SetReadDeadline(time.Unix(1, 0))
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	n, err = q.Read(buf)
	wantTimeout("read ended by a deadline in the past", n, err)

	// The background read (one byte, right after the deadline was cleared) parks (here for
	// as long as it takes); a deadline in the past ends it with a timeout and nothing read: the
	// byte the client pipelined stays.
	q.parkFor = time.Hour
	if _, err := io.WriteString(client, "x"); err != nil {
		t.Fatal(err)
	}
	_ = q.SetReadDeadline(time.Time{})
	go func() {
		for {
			q.mu.Lock()
			parked := q.parked
			q.mu.Unlock()
			if parked {
				_ = q.SetReadDeadline(time.Unix(1, 0))
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	one := make([]byte, 1)
	n, err = q.Read(one)
	wantTimeout("parked read ended by a deadline in the past", n, err)
	_ = q.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := q.Read(one); n != 1 || err != nil || one[0] != 'x' {
		t.Fatalf("next read = %d %q, %v; want the pipelined byte", n, one[:n], err)
	}

	// Not ended, the park gives way to a read of the socket: it gets the byte sent before or
	// during the park. (A new connection: the first one's timer is set for an hour.)
	server, client = tcpPair(t)
	q = newQuietConn(server).(*quietConn)
	if _, err := io.WriteString(client, "y"); err != nil {
		t.Fatal(err)
	}
	_ = q.SetReadDeadline(time.Time{})
	if n, err := q.Read(one); n != 1 || err != nil || one[0] != 'y' {
		t.Fatalf("background read = %d %q, %v; want y", n, one[:n], err)
	}

	// Again, after the timer fired once, then a hang-up: io.EOF.
	if _, err := io.WriteString(client, "z"); err != nil {
		t.Fatal(err)
	}
	_ = q.SetReadDeadline(time.Time{})
	if n, err := q.Read(one); n != 1 || err != nil || one[0] != 'z' {
		t.Fatalf("second background read = %d %q, %v; want z", n, one[:n], err)
	}
	client.Close()
	_ = q.SetReadDeadline(time.Time{})
	if n, err := q.Read(one); n != 0 || err != io.EOF {
		t.Fatalf("background read after a hang-up = %d, %v; want io.EOF", n, err)
	}
}

// TestQuietConnCloseEndsAParkedRead: closing the connection ends the background read with the
// closed connection's error.
func TestQuietConnCloseEndsAParkedRead(t *testing.T) {
	server, _ := tcpPair(t)
	q := newQuietConn(server).(*quietConn)
	q.parkFor = time.Hour // only Close ends the park
	_ = q.SetReadDeadline(time.Time{})
	go func() {
		for {
			q.mu.Lock()
			parked := q.parked
			q.mu.Unlock()
			if parked {
				_ = q.Close()
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	if n, err := q.Read(make([]byte, 1)); n != 0 || !errors.Is(err, net.ErrClosed) {
		t.Fatalf("parked read after Close = %d, %v; want net.ErrClosed", n, err)
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
