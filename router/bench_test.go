package router

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"testing"

	"slidecells/router/placement"
	"slidecells/shared/ids"
)

// discardWriter is a ResponseWriter that keeps nothing, so the benchmarks measure the router
// and its transport rather than a recorder.
type discardWriter struct{ h http.Header }

func (d *discardWriter) Header() http.Header         { return d.h }
func (d *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (d *discardWriter) WriteHeader(int)             {}

type staticSource struct{ url, ws string }

func (s staticSource) Placement(context.Context, string) (placement.Placement, error) {
	return placement.Placement{CellID: "cell-a", Epoch: 1}, nil
}

func (s staticSource) Cells(context.Context) ([]Cell, error) {
	return []Cell{{ID: "cell-a", URL: s.url, State: CellActive}}, nil
}

func benchBackend(b *testing.B) *httptest.Server {
	body := []byte(`{"service":"slidecells","version":"1.0.0-bench"}`)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	}))
	b.Cleanup(srv.Close)
	return srv
}

func benchServe(b *testing.B, h http.Handler, path string) {
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		w := &discardWriter{h: http.Header{}}
		for pb.Next() {
			r := httptest.NewRequest(http.MethodGet, path, nil)
			r.RemoteAddr = "127.0.0.1:1234"
			clear(w.h)
			h.ServeHTTP(w, r)
		}
	})
}

// BenchmarkRouter measures one proxied GET through the router's handler (cached placement),
// including its transport and an in-process backend. Compare with BenchmarkBareReverseProxy.
func BenchmarkRouter(b *testing.B) {
	backend := benchBackend(b)
	ws := ids.New(ids.Workspace)
	src := staticSource{url: backend.URL, ws: ws}
	rt, err := New(context.Background(), Config{Placements: src, Cells: src, ProbeInterval: -1, CellsRefresh: -1})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(rt.Close)
	b.Run("workspace", func(b *testing.B) { benchServe(b, rt, "/api/v1/workspaces/"+ws) })
	b.Run("any-cell", func(b *testing.B) { benchServe(b, rt, "/api/v1/system/version") })
}

// BenchmarkBareReverseProxy is the floor: a ReverseProxy with the same buffer pool and nothing
// else, over http.Transport and over the router's own transport.
func BenchmarkBareReverseProxy(b *testing.B) {
	backend := benchBackend(b)
	u, _ := url.Parse(backend.URL)
	std := &http.Transport{MaxIdleConnsPerHost: 256, DisableCompression: true}
	b.Cleanup(std.CloseIdleConnections)
	lean := CellTransport(u, Config{})
	b.Cleanup(lean.Close)
	for _, tr := range []struct {
		name string
		rt   http.RoundTripper
	}{{"http.Transport", std}, {"hop", lean}} {
		p := &httputil.ReverseProxy{Transport: tr.rt, BufferPool: &bufferPool{}, Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(u)
			pr.SetXForwarded()
		}}
		b.Run(tr.name, func(b *testing.B) { benchServe(b, p, "/api/v1/system/version") })
	}
}
