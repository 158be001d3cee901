package h1

import (
	"io"
	"log"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"slidecells/shared/testenv"
)

// countHandler answers "ok" and counts its requests.
func countHandler(n *atomic.Int32) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		_, _ = io.WriteString(w, "ok")
	})
}

// TestReadHeaderTimeout: a head that does not end in time is cut, whether it stalls or
// trickles in; the handler never sees it.
func TestReadHeaderTimeout(t *testing.T) {
	var served atomic.Int32
	_, addr, _ := startH1(t, countHandler(&served), func(s *Server) { s.ReadHeaderTimeout = 300 * time.Millisecond })

	stalled := dial(t, addr)
	stalled.send("GET / HTTP/1.1\r\nHost: example.com\r\n")
	if b := stalled.waitClosed(); len(b) != 0 {
		t.Fatalf("stalled head answered %q", b)
	}

	// A keep-alive connection: the second head stalls.
	second := dial(t, addr)
	second.send(get)
	if _, body := second.mustRead("GET"); body != "ok" {
		t.Fatalf("first request: %q", body)
	}
	second.send("GET / HTTP/1.1\r\n")
	if b := second.waitClosed(); len(b) != 0 {
		t.Fatalf("stalled second head answered %q", b)
	}

	// A byte every 20 ms of a head that would take a minute to arrive (under the 4 KiB buffer).
	trickle := dial(t, addr)
	head := "GET / HTTP/1.1\r\nHost: example.com\r\nX: " + strings.Repeat("v", 3000) + "\r\n\r\n"
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for i := 0; i < len(head); i++ {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			if _, err := trickle.nc.Write([]byte{head[i]}); err != nil {
				return
			}
		}
	}()
	if b := trickle.waitClosed(); len(b) != 0 {
		t.Fatalf("trickled head answered %q", b)
	}

	// Over the loop's buffer: net/http reads the rest, under the same limit.
	long := dial(t, addr)
	long.send("GET / HTTP/1.1\r\nHost: example.com\r\nX: " + strings.Repeat("v", bufSize))
	if b := long.waitClosed(); len(b) != 0 {
		t.Fatalf("stalled long head answered %q", b)
	}
	if n := served.Load(); n != 1 {
		t.Fatalf("handler served %d requests, want 1", n)
	}
}

// TestIdleTimeout: a keep-alive connection that sends nothing more is closed.
func TestIdleTimeout(t *testing.T) {
	var served atomic.Int32
	_, addr, _ := startH1(t, countHandler(&served), func(s *Server) { s.IdleTimeout = 300 * time.Millisecond })
	c := dial(t, addr)
	c.send(get)
	if resp, body := c.mustRead("GET"); body != "ok" || resp.Close {
		t.Fatalf("answer %q close %v", body, resp.Close)
	}
	if b := c.waitClosed(); len(b) != 0 {
		t.Fatalf("idle connection sent %q", b)
	}
}

// TestMaxConns: beyond MaxConns a connection is not served while every open one is busy (its
// handler runs, or net/http serves it); it is once one of them closes, net/http's or the loop's.
func TestMaxConns(t *testing.T) {
	var served atomic.Int32
	s, addr, _ := startH1(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/busy" {
			// Until its client goes (net/http sees that only once the body is read).
			_, _ = io.Copy(io.Discard, r.Body)
			<-r.Context().Done()
			return
		}
		countHandler(&served).ServeHTTP(w, r)
	}), func(s *Server) { s.MaxConns = 2 })
	busy := func() *client {
		c := dial(t, addr)
		c.send("GET /busy HTTP/1.1\r\nHost: example.com\r\n\r\n")
		return c
	}
	// waitsFor: a new connection (which closes after its answer) is not served while holder
	// is open, and is once holder closes.
	waitsFor := func(what string, holder *client) {
		t.Helper()
		waiting := dial(t, addr)
		waiting.send("GET / HTTP/1.1\r\nHost: example.com\r\nConnection: close\r\n\r\n")
		answered := waiting.readAsync("GET")
		// Not a measure: the connection must not be served while the busy ones are open. A
		// wrong server fails this at once; a right one cannot.
		select {
		case b := <-answered:
			t.Fatalf("served while %s was open: %q", what, b)
		case <-time.After(300 * time.Millisecond):
		}
		_ = holder.nc.Close()
		if b := wait(t, answered, "answer once a place is free"); b != "ok" {
			t.Fatalf("after %s closed: %q", what, b)
		}
		_ = waiting.nc.Close()
	}

	first := busy()
	eventually(t, "the busy request at its handler", func() bool { return busyConns(s) == 1 })
	handed := dial(t, addr) // chunked: net/http serves it
	handed.send("POST /busy HTTP/1.1\r\nHost: example.com\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
	eventually(t, "net/http's request at its handler", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, w := range s.handed {
			if !w.serving {
				return false
			}
		}
		return len(s.sem) == 2
	})
	if n := len(s.sem); n != 2 {
		t.Fatalf("%d places taken, want 2", n)
	}
	waitsFor("net/http's connection", handed)

	eventually(t, "the place of the connection closed after its answer", func() bool { return len(s.sem) == 1 })
	_ = busy()
	eventually(t, "two busy requests", func() bool { return busyConns(s) == 2 })
	waitsFor("a busy connection of the loop's", first)
	if st := s.Stats(); st.Waited != 2 || st.Evicted != [2]uint64{} {
		t.Fatalf("stats %+v, want 2 connections that waited and none closed to make room", st)
	}
}

// busyConns counts the loop's connections whose handler runs.
func busyConns(s *Server) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for c := range s.conns {
		if c.state.Load() == stateActive {
			n++
		}
	}
	return n
}

// TestMaxConnsClosesTheLongestIdle: at MaxConns a new connection is served at once by closing
// the connection idle the longest between keep-alive requests; the others stay open. Without
// it anyone could hold the cap with connections that ask once and then idle, and every new
// client would wait in the accept queue for the idle timeout.
func TestMaxConnsClosesTheLongestIdle(t *testing.T) {
	var served atomic.Int32
	s, addr, _ := startH1(t, countHandler(&served), func(s *Server) { s.MaxConns = 2 })
	oldest := dial(t, addr)
	oldest.send(get)
	oldest.mustRead("GET")
	// Idle states are stamped with the sweep's clock: the next one must carry a later tick.
	tick := s.clock.Load()
	eventually(t, "the sweep's clock to move on", func() bool { return s.clock.Load() != tick })
	recent := dial(t, addr)
	recent.send(get)
	recent.mustRead("GET")

	servedByClosing(t, addr, oldest, recent)
	if st := s.Stats(); st.Open != 2 || st.MaxConns != 2 || st.Evicted != [2]uint64{EvictIdle: 1} || st.Waited != 0 {
		t.Fatalf("stats %+v, want 2 open of 2, one idle connection evicted, none waited", st)
	}
}

// TestMaxConnsClosesNetHTTPsIdle: a connection the loop handed to net/http is closed to make
// room as well once it idles, or its head stalls: otherwise a client could hoard the places
// with requests the loop hands over (a chunked body, a head beyond its buffer).
func TestMaxConnsClosesNetHTTPsIdle(t *testing.T) {
	var served atomic.Int32
	_, addr, _ := startH1(t, countHandler(&served), func(s *Server) { s.MaxConns = 2 })
	handed := dial(t, addr)
	handed.send("POST / HTTP/1.1\r\nHost: example.com\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
	handed.mustRead("POST")
	slow := dial(t, addr)
	// A head beyond the loop's buffer, still coming: net/http reads it, slowly.
	slow.send("GET / HTTP/1.1\r\nHost: example.com\r\nX-Long: " + strings.Repeat("a", bufSize) + "\r\n")
	time.Sleep(evictHeadAfter + sweepEvery)

	// The stalled head first, then the idle connection; the newcomers stay.
	next := servedByClosing(t, addr, slow, nil)
	servedByClosing(t, addr, handed, next)
}

// servedByClosing checks that a new connection at MaxConns is served, that victim is closed
// for it without a byte, and that kept (when not nil) still serves requests. It returns the
// new connection, left open and idle.
func servedByClosing(t *testing.T, addr string, victim, kept *client) *client {
	t.Helper()
	next := dial(t, addr)
	next.send(get)
	if _, b := next.mustRead("GET"); b != "ok" {
		t.Fatalf("the new connection: %q", b)
	}
	if b := victim.waitClosed(); len(b) != 0 {
		t.Fatalf("the connection closed to make room got %q", b)
	}
	if kept != nil {
		kept.send(get)
		if _, b := kept.mustRead("GET"); b != "ok" {
			t.Fatalf("a connection that should have stayed: %q", b)
		}
	}
	return next
}

// TestMaxConnsClosesStalledHeads: at MaxConns a connection whose head has stalled for
// evictHeadAfter is closed to make room, before an idle keep-alive connection; a connection
// that has only just connected is not closed for another.
func TestMaxConnsClosesStalledHeads(t *testing.T) {
	var served atomic.Int32
	s, addr, _ := startH1(t, countHandler(&served), func(s *Server) { s.MaxConns = 2 })
	idle := dial(t, addr)
	idle.send(get)
	idle.mustRead("GET")
	stalled := dial(t, addr)
	stalled.send("GET / HT") // a head that never ends, as a slowloris client sends it
	time.Sleep(evictHeadAfter + sweepEvery)

	servedByClosing(t, addr, stalled, idle) // the idle one was idle the longer
	if st := s.Stats(); st.Evicted != [2]uint64{EvictStalledHead: 1} {
		t.Fatalf("evicted %v, want one stalled head", st.Evicted)
	}
}

// TestMaxConnsSparesAFreshHead: a connection that has only just connected is not closed to make
// room; the newcomer waits until that head has stalled for evictHeadAfter.
func TestMaxConnsSparesAFreshHead(t *testing.T) {
	var served atomic.Int32
	_, addr, _ := startH1(t, countHandler(&served), func(s *Server) { s.MaxConns = 1 })
	fresh := dial(t, addr)
	fresh.send("GET / HT")
	late := dial(t, addr)
	late.send(get)
	answered := late.readAsync("GET")
	select {
	case b := <-answered:
		t.Fatalf("served at once (%q): a head just begun was closed for it", b)
	case <-time.After(300 * time.Millisecond):
	}
	if b := wait(t, answered, "served once the fresh head has stalled"); b != "ok" {
		t.Fatalf("late connection: %q", b)
	}
	if b := fresh.waitClosed(); len(b) != 0 {
		t.Fatalf("the stalled head got %q", b)
	}
}

// TestHangUpCancelsContext: a client that goes away while its request is served ends the
// request's context (the sweep's MSG_PEEK), without a byte read off the connection.
func TestHangUpCancelsContext(t *testing.T) {
	started, ended := make(chan struct{}, 1), make(chan error, 1)
	_, addr, _ := startH1(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		started <- struct{}{}
		<-r.Context().Done()
		ended <- r.Context().Err()
	}), nil)
	c := dial(t, addr)
	c.send(get)
	wait(t, started, "request")
	_ = c.nc.Close()
	if err := wait(t, ended, "end of the request's context"); err == nil {
		t.Fatal("context ended without an error")
	}
}

// TestPipelinedNotHangUp: bytes of a pipelined request waiting behind a slow one are not a
// hang-up; the slow request's context stays alive and both are answered in order.
func TestPipelinedNotHangUp(t *testing.T) {
	release, started := make(chan struct{}), make(chan struct{}, 1)
	s, addr, _ := startH1(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			started <- struct{}{}
			select {
			case <-release:
			case <-r.Context().Done():
				http.Error(w, "context ended", http.StatusInternalServerError)
				return
			}
		}
		_, _ = io.WriteString(w, r.URL.Path)
	}), nil)
	c := dial(t, addr)
	c.send("GET /slow HTTP/1.1\r\nHost: a\r\n\r\nGET /next HTTP/1.1\r\nHost: a\r\n\r\n")
	// Three sweeps later at least two looked at the busy connection.
	wait(t, started, "slow request")
	since := s.clock.Load()
	eventually(t, "three sweeps", func() bool { return s.clock.Load()-since >= int64(3*sweepEvery) })
	close(release)
	for _, want := range []string{"/slow", "/next"} {
		if _, body := c.mustRead("GET"); body != want {
			t.Fatalf("answer %q, want %q", body, want)
		}
	}
}

// TestBodyThenNextRequest: the rest of a body the handler read in part is discarded and the
// requests after it, sent at once, are read in step.
func TestBodyThenNextRequest(t *testing.T) {
	_, addr, _ := startH1(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b := make([]byte, 3)
		n, _ := io.ReadFull(r.Body, b)
		_, _ = io.WriteString(w, r.URL.Path+":"+string(b[:n]))
	}), nil)
	c := dial(t, addr)
	c.send("POST /a HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\n0123456789")
	c.send("POST /b HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\nxy")
	c.send(get)
	for _, want := range []string{"/a:012", "/b:xy", "/:"} {
		if _, body := c.mustRead("POST"); body != want {
			t.Fatalf("answer %q, want %q", body, want)
		}
	}
}

// TestPanicKeepsServing: a handler's panic closes its connection only; a panic other than
// http.ErrAbortHandler is logged with its stack.
func TestPanicKeepsServing(t *testing.T) {
	var logBuf testenv.Buffer
	_, addr, _ := startH1(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/abort":
			panic(http.ErrAbortHandler)
		case "/boom":
			panic("boom")
		}
		_, _ = io.WriteString(w, "ok")
	}), func(s *Server) { s.ErrorLog = log.New(&logBuf, "", 0) })

	other := dial(t, addr) // a keep-alive connection open across the panics
	other.send(get)
	other.mustRead("GET")
	for _, path := range []string{"/abort", "/boom"} {
		c := dial(t, addr)
		c.send("GET " + path + " HTTP/1.1\r\nHost: a\r\n\r\n")
		if b := c.waitClosed(); len(b) != 0 {
			t.Fatalf("%s answered %q", path, b)
		}
		other.send(get)
		if _, body := other.mustRead("GET"); body != "ok" {
			t.Fatalf("after %s: %q", path, body)
		}
	}
	logged := logBuf.String()
	if !strings.Contains(logged, "panic serving") || !strings.Contains(logged, "boom") ||
		!strings.Contains(logged, "goroutine") {
		t.Fatalf("the panic is not logged with its stack: %q", logged)
	}
	if strings.Count(logged, "panic serving") != 1 {
		t.Fatalf("ErrAbortHandler logged too: %q", logged)
	}
}

// TestRequestContextNamesTheServer: as under net/http's server, a request's context holds the
// server (http.ServerContextKey; httputil.ReverseProxy aborts a broken answer only under one)
// and the connection's local address (http.LocalAddrContextKey).
func TestRequestContextNamesTheServer(t *testing.T) {
	type seen struct {
		server bool
		local  string
	}
	got := make(chan seen, 1)
	_, addr, _ := startH1(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		la, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
		s := seen{server: r.Context().Value(http.ServerContextKey) != nil}
		if la != nil {
			s.local = la.String()
		}
		got <- s
	}), nil)
	res, err := http.Get("http://" + addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if s := <-got; !s.server || s.local != addr {
		t.Fatalf("request context: server %v, local address %q; want a server and %q", s.server, s.local, addr)
	}
}
