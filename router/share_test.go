package router

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"slidecells/shared/ids"
)

// TestWorkspaceShareNeverExceedsItsBound: goroutines of a few workspaces acquire and release
// concurrently; no workspace ever has more than max counted, and nothing is left at the end.
func TestWorkspaceShareNeverExceedsItsBound(t *testing.T) {
	const max, workers, rounds = 4, 16, 2000
	s := newWorkspaceShare()
	wss := []string{"ws_a", "ws_b", "ws_c"}
	var held [3]atomic.Int64
	var over atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range rounds {
				k := (w + i) % len(wss)
				if !s.acquire(wss[k], max) {
					continue
				}
				if held[k].Add(1) > max {
					over.Add(1)
				}
				held[k].Add(-1)
				s.release(wss[k])
			}
		})
	}
	wg.Wait()
	if over.Load() != 0 {
		t.Fatalf("a workspace had more than %d requests counted %d times", max, over.Load())
	}
	if n := s.len(); n != 0 {
		t.Fatalf("%d workspaces still counted", n)
	}
	for _, ws := range wss {
		if !s.acquire(ws, 1) {
			t.Fatalf("%s refused after everything was released", ws)
		}
	}
}

// BenchmarkWorkspaceShare is one request's acquire and release, from every processor at once
// (workspaces spread over the shards).
func BenchmarkWorkspaceShare(b *testing.B) {
	s := newWorkspaceShare()
	var next atomic.Int64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		ws := "ws_" + string(rune('a'+next.Add(1)%26))
		for pb.Next() {
			if s.acquire(ws, 1<<20) {
				s.release(ws)
			}
		}
	})
}

// TestWorkspaceShareIsNotHeldByStrangersWhoDoNotRead: the router does not authenticate, so a
// stranger can name any workspace (in the path, or X-Workspace-ID on a public route such as
// /openapi.json) and get the cell's answer (a public document, a refusal). Once the cell has
// answered, the time the answer takes to reach the client is the client's to choose: if the
// workspace's share counted it, a few strangers asking for answers they never read would hold
// the whole share, and the workspace's members would get 429 for every request. The share
// counts a request only until the cell's answer begins.
func TestWorkspaceShareIsNotHeldByStrangersWhoDoNotRead(t *testing.T) {
	const share = 2
	ws := ids.New(ids.Workspace)
	big := make([]byte, 16<<20) // far beyond the sockets' buffers
	started := make(chan struct{}, share)
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/openapi.json" {
			_, _ = io.WriteString(w, `{"ok":true}`)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush() // the answer's head is at the router
		started <- struct{}{}
		_, _ = w.Write(big)
	}))
	t.Cleanup(backend.Close)
	src := staticSource{url: backend.URL, ws: ws}
	rt, err := New(context.Background(), Config{Placements: src, Cells: src, ProbeInterval: -1, CellsRefresh: -1, MaxInFlightPerWorkspace: share})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rt.Close)
	srv := startPublic(t, rt.Handler(), ServerConfig{})
	for range share {
		c, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if err := c.(*net.TCPConn).SetReadBuffer(4096); err != nil {
			t.Fatal(err)
		}
		// A stranger: no credential, someone else's workspace, and it never reads.
		if _, err := io.WriteString(c, "GET /openapi.json HTTP/1.1\r\nHost: router\r\nX-Workspace-ID: "+ws+"\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
	}
	for range share {
		select {
		case <-started:
		case <-time.After(20 * time.Second):
			t.Fatal("the cell did not answer the strangers")
		}
	}
	for i := 0; rt.share.inFlight(ws) != 0; i++ {
		if i == 200 {
			t.Fatalf("%d of the workspace's share held by strangers who do not read their answers", rt.share.inFlight(ws))
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The workspace's own member is served.
	res, err := testClient.Get(srv.URL + "/api/v1/workspaces/" + ws + "/projects")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("the workspace's member got %d %s while strangers held unread answers", res.StatusCode, res.Header.Get("X-Ratelimit-Scope"))
	}
}

// inFlight is the number of requests of ws in flight.
func (s *workspaceShare) inFlight(ws string) int {
	sh := s.shard(ws)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.n[ws]
}

// len is the number of workspaces with a request in flight.
func (s *workspaceShare) len() int {
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		n += len(sh.n)
		sh.mu.Unlock()
	}
	return n
}
