package router

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"slidecells/shared/ids"
	"slidecells/shared/problem"
	"slidecells/shared/testenv"
)

// TestOpsEndpointsAreNotPublic: /metrics and the health endpoints answer on the internal
// listener only; on the public one they are the 404 of every unknown path.
func TestOpsEndpointsAreNotPublic(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, path := range []string{"/metrics", "/livez", "/readyz", "/metrics/", "/healthz"} {
		b.get(t, path).wantProblem(t, http.StatusNotFound, problem.NotFound)
	}
	for _, path := range []string{"/metrics", "/livez", "/readyz"} {
		res, err := testClient.Get(b.ops.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Errorf("internal %s: %d", path, res.StatusCode)
		}
	}
	if n := b.a.hits.Load() + b.b.hits.Load(); n != 0 {
		t.Errorf("cells received %d API requests for operator paths", n)
	}
}

// slowRequest opens a connection to addr and sends a request that declares a body of length
// bytes but sends only its first 8, then holds the connection.
func slowRequest(t *testing.T, addr, method, path string, length int, header ...string) net.Conn {
	t.Helper()
	conn, err := testenv.SlowRequest(addr, method, path, "router.test", length, header...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// slowCases are requests whose clients hold their bodies back: with and without a token, on a
// known and an unknown workspace, a body too large to buffer for a 421 retry (streamed), and a
// route without a workspace (streamed to any cell).
func slowCases(b *bundle) []struct {
	name, path string
	length     int
	header     []string
} {
	return []struct {
		name, path string
		length     int
		header     []string
	}{
		{"with token", "/api/v1/workspaces/" + b.wsA + "/projects", 1000, []string{"Authorization", "Bearer svc_pat_test"}},
		{"without token", "/api/v1/workspaces/" + b.wsA + "/projects", 1000, nil},
		{"unknown workspace", "/api/v1/workspaces/" + ids.New(ids.Workspace) + "/projects", 1000, []string{"Authorization", "Bearer svc_pat_test"}},
		{"streamed body", "/api/v1/workspaces/" + b.wsB + "/projects", 4 << 20, nil},
		{"no workspace", "/api/v1/auth/tokens", 1000, nil},
	}
}

// TestOthersAreServedWhileSlowBodiesAreHeld: many connections holding their bodies back take
// nothing from other clients.
func TestOthersAreServedWhileSlowBodiesAreHeld(t *testing.T) {
	t.Parallel()
	// The grace outlasts the test: every slow connection is certainly still held while the
	// others are served.
	b := setup(t, func(c *Config) { c.BodyTimeout = time.Hour })
	addr := b.srv.Listener.Addr().String()
	for _, c := range slowCases(b) {
		for range 20 {
			slowRequest(t, addr, http.MethodPost, c.path, c.length, c.header...)
		}
	}
	for range 10 {
		b.get(t, "/api/v1/workspaces/"+b.wsA).wantCell(t, "cell-a")
		b.get(t, "/api/v1/workspaces/"+b.wsB).wantCell(t, "cell-b")
		if a := b.get(t, "/api/v1/system/version"); a.status != http.StatusOK {
			t.Fatalf("route without a workspace: %d", a.status)
		}
	}
}

// TestSlowBodiesAreCut: a request that declares 1,000 bytes and sends 8 gets 408 once the
// body grace has passed, and its connection is closed; the cell's breaker does not count it,
// and other clients are served throughout.
func TestSlowBodiesAreCut(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *Config) { c.BodyTimeout = 200 * time.Millisecond })
	addr := b.srv.Listener.Addr().String()
	const perCase = 8
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for _, c := range slowCases(b) {
		for range perCase {
			conn := slowRequest(t, addr, http.MethodPost, c.path, c.length, c.header...)
			wg.Go(func() {
				// Bounds the test, not the router: a connection the router never cuts fails here.
				a, err := testenv.ReadAnswer(conn, 20*time.Second)
				if err != nil {
					errs <- fmt.Errorf("%s: no answer: %v", c.name, err)
					return
				}
				if a.Status != http.StatusRequestTimeout || !strings.Contains(string(a.Body), string(problem.BadRequest)) {
					errs <- fmt.Errorf("%s: %d %s, want 408", c.name, a.Status, a.Body)
					return
				}
				if strings.Contains(string(a.Body), "svc_pat") {
					errs <- fmt.Errorf("%s: the answer repeats the token", c.name)
				}
				if !a.Closed {
					errs <- fmt.Errorf("%s: connection not closed after the 408", c.name)
				}
			})
		}
	}
	// Served meanwhile.
	for range 5 {
		b.get(t, "/api/v1/workspaces/"+b.wsA).wantCell(t, "cell-a")
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// perCase streamed cuts on each cell exceed BreakerFailures: had they counted, the
	// breakers would be open now.
	b.get(t, "/api/v1/workspaces/"+b.wsB).wantCell(t, "cell-b")
	for range 4 {
		if a := b.get(t, "/api/v1/system/version"); a.status != http.StatusOK {
			t.Fatalf("after the cuts: %d (breaker opened by the client's slowness?)", a.status)
		}
	}
	if n := b.a.hits.Load(); n < 5 {
		t.Errorf("cell-a served %d requests", n)
	}
	if !strings.Contains(b.access.String(), `"status":408`) {
		t.Error("no 408 in the access log")
	}
}

// TestIdleConnectionsAreClosed: a keep-alive connection that sends no next request is closed
// after IdleTimeout.
func TestIdleConnectionsAreClosed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	srv := startPublic(t, b.rt, ServerConfig{IdleTimeout: 100 * time.Millisecond})
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second)) // bounds the test
	if _, err := io.WriteString(conn, "GET /api/v1/workspaces/"+b.wsA+" HTTP/1.1\r\nHost: router.test\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || res.Close {
		t.Fatalf("first answer %d (close %v)", res.StatusCode, res.Close)
	}
	if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
		t.Fatalf("idle connection not closed: %v", err)
	}
}

// TestConnectionCap: at MaxConns open connections a new one is served by closing the one idle
// the longest (router/h1 TestMaxConns: it waits while every connection is busy). Anyone could
// otherwise fill the cap with connections that ask once and idle, and every other client
// would wait in the accept queue for the idle timeout.
func TestConnectionCap(t *testing.T) {
	t.Parallel()
	b := setup(t)
	srv := startPublic(t, b.rt, ServerConfig{MaxConns: 2})
	addr := srv.Listener.Addr().String()
	var held []net.Conn
	var readers []*bufio.Reader
	ask := func(i int) error {
		_ = held[i].SetDeadline(time.Now().Add(20 * time.Second))
		if _, err := io.WriteString(held[i], "GET /api/v1/system/version HTTP/1.1\r\nHost: router.test\r\n\r\n"); err != nil {
			return err
		}
		res, err := http.ReadResponse(readers[i], nil)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, res.Body)
		return res.Body.Close()
	}
	for i := range 2 {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		held, readers = append(held, conn), append(readers, bufio.NewReader(conn))
		if err := ask(i); err != nil {
			t.Fatal(err)
		}
	}
	c := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	res, err := c.Get(srv.URL + "/api/v1/system/version")
	if err != nil {
		t.Fatalf("a third connection at MaxConns=2, both open ones idle: %v", err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("third connection: %d", res.StatusCode)
	}
	// One of the two went (the one idle the longest: router/h1 TestMaxConnsClosesTheLongestIdle
	// checks which; here both may carry the same tick of the 200 ms clock); the other serves on.
	closed, open := 0, -1
	for i := range held {
		_ = held[i].SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		if _, err := readers[i].Read(make([]byte, 1)); errors.Is(err, os.ErrDeadlineExceeded) {
			open = i
		} else {
			closed++
		}
	}
	if closed != 1 || open < 0 {
		t.Fatalf("%d of the 2 idle connections closed for the third, want 1", closed)
	}
	if err := ask(open); err != nil {
		t.Fatalf("the idle connection left open: %v", err)
	}
	m := b.metrics(t)
	for _, want := range []string{
		`router_public_connections_evicted_total{reason="idle"} 1`,
		`router_public_connections_evicted_total{reason="stalled_head"} 0`,
		"router_public_connections_max 2",
	} {
		if !strings.Contains(m, want+"\n") {
			t.Errorf("metrics lack %q", want)
		}
	}
}

// TestSilentConnectionsDoNotKeepClientsOut: a client that opens ROUTER_MAX_CONNS connections
// and sends nothing on them does not keep others out: each newcomer is served in place of a
// connection silent for 2 s (before, they all waited in the accept queue until the silent ones
// hit the 10 s head timeout, and a client that reopened them held the router for ever).
func TestSilentConnectionsDoNotKeepClientsOut(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// A head timeout beyond the clients' 20 s wait: only making room can serve them.
	srv := startPublic(t, b.rt, ServerConfig{MaxConns: 8, ReadHeaderTimeout: time.Minute})
	addr := srv.Listener.Addr().String()
	for range 8 {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
	}
	time.Sleep(2300 * time.Millisecond) // the silent ones' heads stall (router/h1 evictHeadAfter)
	for i := range 3 {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
		if _, err := io.WriteString(conn, "GET /api/v1/system/version HTTP/1.1\r\nHost: router.test\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		res, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("client %d behind 8 silent connections: %v", i+1, err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Fatalf("client %d: %d", i+1, res.StatusCode)
		}
	}
	if m := b.metrics(t); !strings.Contains(m, `router_public_connections_evicted_total{reason="stalled_head"} 3`+"\n") {
		t.Errorf("metrics do not count 3 stalled heads closed:\n%s", grepLines(m, "router_public_connections"))
	}
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
