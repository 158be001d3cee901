package router

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"slidecells/shared/cellproto"
	"slidecells/shared/ids"
)

// singleCellRouter is a router whose one cell, cell-a, is h; every workspace is placed there.
func singleCellRouter(t *testing.T, h http.Handler, opts ...option) *publicSrv {
	t.Helper()
	backend := httptest.NewServer(h)
	t.Cleanup(backend.Close)
	src := staticSource{url: backend.URL}
	cfg := Config{Placements: src, Cells: src, ProbeInterval: -1, CellsRefresh: -1}
	for _, o := range opts {
		o(&cfg)
	}
	rt, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rt.Close)
	return startPublic(t, rt.Handler(), ServerConfig{})
}

// TestAnswerHeadersReachTheClient: the cell's headers (several values of one, too) reach the
// client as sent, without the router-only ones, with the router's X-Cell-ID and X-Request-ID.
func TestAnswerHeadersReachTheClient(t *testing.T) {
	t.Parallel()
	srv := singleCellRouter(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Add("Set-Cookie", "a=1")
		h.Add("Set-Cookie", "b=2")
		h.Set("X-Custom", "yes")
		h.Set("Content-Type", "application/json")
		h.Set(cellproto.HeaderOwningCell, "secret")
		h.Set("X-Seen-Forwarded", r.Header.Get("X-Forwarded-For")+"|"+r.Header.Get("X-Forwarded-Host")+"|"+r.Header.Get("X-Forwarded-Proto"))
		h.Set("X-Seen-UA", strings.Join(r.Header.Values("User-Agent"), ","))
		_, _ = io.WriteString(w, `{}`)
	}))
	for _, ua := range []string{"", "client/1.0"} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/api/v1/workspaces/"+ids.New(ids.Workspace), nil)
		req.Host = "api.example"
		req.Header.Set("User-Agent", ua)
		res, err := testClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		h := res.Header
		if !slices.Equal(h.Values("Set-Cookie"), []string{"a=1", "b=2"}) || h.Get("X-Custom") != "yes" ||
			h.Get("Content-Type") != "application/json" || h.Get(cellproto.HeaderOwningCell) != "" ||
			h.Get(cellproto.HeaderCellID) != "cell-a" || h.Get(cellproto.HeaderRequestID) == "" {
			t.Errorf("answer headers %v", h)
		}
		if got := h.Get("X-Seen-Forwarded"); got != "127.0.0.1|api.example|http" {
			t.Errorf("cell saw X-Forwarded-For|Host|Proto %q", got)
		}
		if got := h.Get("X-Seen-UA"); got != ua {
			t.Errorf("cell saw User-Agent %q, want %q", got, ua)
		}
	}
}

// TestEventStreamIsFlushedAtOnce: a text/event-stream answer reaches the client while the cell
// is still sending it.
func TestEventStreamIsFlushedAtOnce(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv := singleCellRouter(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: first\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		case <-time.After(20 * time.Second): // bounds the test
		}
		_, _ = io.WriteString(w, "data: last\n\n")
	}))
	res, err := testClient.Get(srv.URL + "/api/v1/workspaces/" + ids.New(ids.Workspace) + "/events")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	line, err := bufio.NewReader(res.Body).ReadString('\n')
	close(release) // only now may the cell finish: the first event came through on its own
	if err != nil || line != "data: first\n" || res.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("first event %q (%v), headers %v", line, err, res.Header)
	}
}

// TestUpgradeIsProxied: a 101 answer switches the client's connection through to the cell.
func TestUpgradeIsProxied(t *testing.T) {
	t.Parallel()
	srv := singleCellRouter(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "echo" {
			http.Error(w, "no upgrade", http.StatusBadRequest)
			return
		}
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		_, _ = brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\nX-Custom: up\r\n\r\n")
		_ = brw.Flush()
		_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
		line, _ := brw.ReadString('\n')
		_, _ = io.WriteString(conn, "echo "+line)
	}))
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(20 * time.Second)) // bounds the test
	_, _ = io.WriteString(conn, "GET /api/v1/workspaces/"+ids.New(ids.Workspace)+"/live HTTP/1.1\r\nHost: router.test\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
	br := bufio.NewReader(conn)
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusSwitchingProtocols || res.Header.Get("X-Custom") != "up" || res.Header.Get(cellproto.HeaderCellID) != "cell-a" {
		t.Fatalf("upgrade answer %d %v", res.StatusCode, res.Header)
	}
	_, _ = io.WriteString(conn, "ping\n")
	if line, err := br.ReadString('\n'); err != nil || line != "echo ping\n" {
		t.Fatalf("through the upgraded connection: %q (%v)", line, err)
	}
}
