package h1

import (
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"
)

// TestEvictionNeverCutsAStartedRequest: evictWaiting picks its victim under s.mu and closes it
// after, while the connection's own goroutine moves from idle to active without s.mu. An idle
// keep-alive connection whose next request arrives as a newcomer is accepted at MaxConns must
// either close before its handler starts or be served to the end: closed with its handler
// running, the request's context ended mid-handler (the proxy's request to the cell aborted
// after it may have reached the cell). The choice is a compare-and-swap of the state
// (stateEvicted) that serveOne's own swap to active excludes. Without it (a review's test)
// this failed within 1–25 rounds.
//
// Probabilistic: many fresh silent connections (not evictable: heads younger than
// evictHeadAfter) make the scan long, and the idle connection's request and the newcomer are
// sent with a random offset. The handler counts requests whose context ended while it ran.
func TestEvictionNeverCutsAStartedRequest(t *testing.T) {
	if testing.Short() {
		t.Skip("stress")
	}
	const silent = 1000
	var cut, started atomic.Int32
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/x" {
			started.Add(1)
			time.Sleep(20 * time.Millisecond)
			if r.Context().Err() != nil {
				cut.Add(1)
			}
		}
		_, _ = io.WriteString(w, "ok")
	})
	s, addr, _ := startH1(t, h, func(s *Server) { s.MaxConns = silent + 1 })
	open := func() int { return s.Stats().Open }

	var quiet []net.Conn
	defer func() {
		for _, c := range quiet {
			_ = c.Close()
		}
	}()
	var born time.Time
	refill := func() {
		for _, c := range quiet {
			_ = c.Close()
		}
		quiet = quiet[:0]
		eventually(t, "silent connections gone", func() bool { return open() == 0 })
		for range silent {
			nc, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			quiet = append(quiet, nc)
		}
		eventually(t, "silent connections served", func() bool { return open() == silent })
		born = time.Now()
	}

	spin := func(d time.Duration) {
		for end := time.Now().Add(d); time.Now().Before(end); {
		}
	}
	deadline := time.Now().Add(8 * time.Second)
	rounds, evictedFirst := 0, 0
	for time.Now().Before(deadline) && cut.Load() == 0 {
		if time.Since(born) > 1200*time.Millisecond {
			refill()
		}
		x := dial(t, addr)
		x.send("GET /warm HTTP/1.1\r\nHost: example.com\r\n\r\n")
		x.mustRead("GET") // x idles: the only evictable connection, the cap full
		offset := time.Duration(rand.IntN(600)-300) * time.Microsecond
		newcomer := make(chan net.Conn, 1)
		come := func() {
			nc, err := net.Dial("tcp", addr)
			if err != nil {
				t.Error(err)
			}
			newcomer <- nc
		}
		if offset < 0 {
			go come()
			spin(-offset)
			x.send("GET /x HTTP/1.1\r\nHost: example.com\r\n\r\n")
		} else {
			x.send("GET /x HTTP/1.1\r\nHost: example.com\r\n\r\n")
			spin(offset)
			go come()
		}
		if _, _, err := x.read("GET"); err != nil {
			evictedFirst++
		}
		_ = x.nc.Close()
		if nc := <-newcomer; nc != nil {
			_ = nc.Close()
		}
		eventually(t, "back to the silent ones", func() bool { return open() == silent })
		rounds++
	}
	t.Logf("%d rounds: %d requests started, %d unanswered, %d cut mid-handler; evicted %v",
		rounds, started.Load(), evictedFirst, cut.Load(), s.Stats().Evicted)
	if cut.Load() > 0 {
		t.Fatalf("%d request(s) in flight were closed to make room at MaxConns", cut.Load())
	}
}

// TestNetHTTPsReadOffIsEvictable: a connection handed to net/http (here a chunked body) whose
// handler answers without reading the body is then in net/http's read-off of the rest (up to
// 256 KiB, no deadline: ReadTimeout is 0). It waits as a head does, evictable after
// evictHeadAfter, as the loop's own read-off (response.go, stateHead) is; before, it was in
// neither s.handed nor s.conns, and a client that sent one chunk and then nothing held a place
// for as long as it liked.
func TestNetHTTPsReadOffIsEvictable(t *testing.T) {
	_, addr, _ := startH1(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "no") // a 4xx of the router's: the body is not wanted
	}), func(s *Server) { s.MaxConns = 1 })
	hoarder := dial(t, addr)
	hoarder.send("POST / HTTP/1.1\r\nHost: example.com\r\nTransfer-Encoding: chunked\r\n\r\n1\r\na\r\n")
	time.Sleep(evictHeadAfter + 2*sweepEvery) // longer than any head may stall at the cap

	late := dial(t, addr)
	late.send("GET / HTTP/1.1\r\nHost: example.com\r\nConnection: close\r\n\r\n")
	answered := make(chan error, 1)
	go func() { _, _, err := late.read("GET"); answered <- err }()
	if err := wait(t, answered, "the newcomer served in place of the stalled read-off"); err != nil {
		t.Fatalf("late: %v", err)
	}
}
