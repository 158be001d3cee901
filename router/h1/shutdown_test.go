package h1

import (
	"context"
	"errors"
	"io"
	"net/http"
	"testing"
)

// blockingHandler answers /slow once release is closed, everything else at once; started
// receives a value when /slow begins.
func blockingHandler(started chan<- struct{}, release <-chan struct{}) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			started <- struct{}{}
			<-release
		}
		_, _ = io.WriteString(w, "done "+r.URL.Path)
	})
}

// TestShutdown: idle connections (the loop's and net/http's) are closed at once, an in-flight
// request finishes with Connection: close, and Serve returns http.ErrServerClosed.
func TestShutdown(t *testing.T) {
	started, release := make(chan struct{}, 1), make(chan struct{})
	s, addr, serveErr := startH1(t, blockingHandler(started, release), nil)

	idle := dial(t, addr)
	idle.send(get)
	idle.mustRead("GET")
	handed := dial(t, addr)
	handed.send("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
	if resp, _ := handed.mustRead("GET"); resp.Close {
		t.Fatal("HTTP/1.0 keep-alive answer closes")
	}
	busy := dial(t, addr)
	busy.send("GET /slow HTTP/1.1\r\nHost: example.com\r\n\r\n")
	wait(t, started, "slow request")

	shut := make(chan error, 1)
	go func() { shut <- s.Shutdown(context.Background()) }()
	if b := idle.waitClosed(); len(b) != 0 {
		t.Fatalf("idle connection got %q", b)
	}
	if b := handed.waitClosed(); len(b) != 0 {
		t.Fatalf("handed-off idle connection got %q", b)
	}
	if err := wait(t, serveErr, "Serve's return"); !errors.Is(err, http.ErrServerClosed) {
		t.Fatalf("Serve returned %v", err)
	}
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned %v with a request in flight", err)
	default:
	}

	close(release)
	resp, body := busy.mustRead("GET")
	if body != "done /slow" || !resp.Close {
		t.Fatalf("in-flight answer %q, Connection: close %v", body, resp.Close)
	}
	busy.waitClosed()
	if err := wait(t, shut, "Shutdown's return"); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
}

// TestShutdownDeadline: Shutdown gives up when its context ends, and says so.
func TestShutdownDeadline(t *testing.T) {
	started, release := make(chan struct{}, 1), make(chan struct{})
	defer close(release)
	s, addr, _ := startH1(t, blockingHandler(started, release), nil)
	busy := dial(t, addr)
	busy.send("GET /slow HTTP/1.1\r\nHost: example.com\r\n\r\n")
	wait(t, started, "slow request")
	ctx, cancel := context.WithCancel(context.Background())
	shut := make(chan error, 1)
	go func() { shut <- s.Shutdown(ctx) }()
	cancel()
	if err := wait(t, shut, "Shutdown's return"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Shutdown returned %v, want context.Canceled", err)
	}
}

// TestClose: every connection is closed at once, busy or idle, the loop's or net/http's; the
// busy request's context ends; Serve returns http.ErrServerClosed.
func TestClose(t *testing.T) {
	started, ctxDone := make(chan struct{}, 1), make(chan struct{})
	s, addr, serveErr := startH1(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			started <- struct{}{}
			<-r.Context().Done()
			close(ctxDone)
			return
		}
		_, _ = io.WriteString(w, "ok")
	}), nil)

	idle := dial(t, addr)
	idle.send(get)
	idle.mustRead("GET")
	handed := dial(t, addr)
	handed.send("POST / HTTP/1.1\r\nHost: example.com\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
	handed.mustRead("POST")
	busy := dial(t, addr)
	busy.send("GET /slow HTTP/1.1\r\nHost: example.com\r\n\r\n")
	wait(t, started, "slow request")

	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for name, c := range map[string]*client{"idle": idle, "handed-off": handed, "busy": busy} {
		if b := c.waitClosed(); len(b) != 0 {
			t.Fatalf("%s connection got %q", name, b)
		}
	}
	if err := wait(t, serveErr, "Serve's return"); !errors.Is(err, http.ErrServerClosed) {
		t.Fatalf("Serve returned %v", err)
	}
	wait(t, ctxDone, "end of the busy request's context")
	if err := s.Serve(nil); !errors.Is(err, http.ErrServerClosed) {
		t.Fatalf("Serve after Close returned %v", err)
	}
}

// TestShutdownAtMaxConns: Serve returns as soon as Shutdown begins, even while it waits for a
// place under MaxConns.
func TestShutdownAtMaxConns(t *testing.T) {
	started, release := make(chan struct{}, 1), make(chan struct{})
	s, addr, serveErr := startH1(t, blockingHandler(started, release), func(s *Server) { s.MaxConns = 1 })
	busy := dial(t, addr)
	busy.send("GET /slow HTTP/1.1\r\nHost: example.com\r\n\r\n")
	wait(t, started, "slow request")
	shut := make(chan error, 1)
	go func() { shut <- s.Shutdown(context.Background()) }()
	if err := wait(t, serveErr, "Serve's return"); !errors.Is(err, http.ErrServerClosed) {
		t.Fatalf("Serve returned %v", err)
	}
	close(release)
	if resp, body := busy.mustRead("GET"); body != "done /slow" || !resp.Close {
		t.Fatalf("in-flight answer %q, Connection: close %v", body, resp.Close)
	}
	if err := wait(t, shut, "Shutdown's return"); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
}
