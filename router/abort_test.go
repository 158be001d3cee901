package router

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"slidecells/shared/ids"
)

// TestBrokenAnswerReachesTheClientBroken: a cell's answer that breaks mid-body (chunked, so
// only its end marker says it is whole) must reach the client broken, as net/http's server
// and the ReverseProxy make it (the proxy panics with http.ErrAbortHandler, the server closes
// the connection without ending the body), never as a shorter answer that looks complete
// (router/h1 gives its requests the server in their context, as net/http does, for that).
func TestBrokenAnswerReachesTheClientBroken(t *testing.T) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, strings.Repeat("first part ", 100))
		w.(http.Flusher).Flush()
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close() // the cell dies mid-answer
		}
	}))
	_, srv, ws := routeTo(t, backend, ServerConfig{})
	c, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, "GET /api/v1/workspaces/"+ws+" HTTP/1.1\r\nHost: router\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(res.Body)
	if err == nil {
		t.Fatalf("a broken answer reached the client as a complete one (%d bytes, %v)", len(b), res.TransferEncoding)
	}
	t.Logf("read %d bytes, then %v", len(b), err)
}

// routeTo serves a router in front of backend alone (its one cell, cell-a) on the public
// listener with sc, and returns it, the listener and a workspace placed on the cell.
func routeTo(t *testing.T, backend *httptest.Server, sc ServerConfig) (*Router, *publicSrv, string) {
	t.Helper()
	t.Cleanup(backend.Close)
	ws := ids.New(ids.Workspace)
	src := staticSource{url: backend.URL, ws: ws}
	rt, err := New(context.Background(), Config{Placements: src, Cells: src, ProbeInterval: -1, CellsRefresh: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rt.Close)
	return rt, startPublic(t, rt.Handler(), sc), ws
}
