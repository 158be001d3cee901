package httpserve

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestRunServesUntilTheContextEnds: a request in flight when the context ends still gets its
// answer; after Run returns, the listener takes no connection.
func TestRunServesUntilTheContextEnds(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	started := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		stop() // the shutdown begins while this request runs
		_, _ = io.WriteString(w, "done")
	})
	done := make(chan error, 1)
	go func() { done <- Run(ctx, ln, h, 10*time.Second) }()
	resp, err := http.Get("http://" + ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	<-started
	if string(body) != "done" {
		t.Fatalf("in-flight answer %q", body)
	}
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if _, err := net.Dial("tcp", ln.Addr().String()); err == nil {
		t.Fatal("still listening after shutdown")
	}
}

func TestStatusWriter(t *testing.T) {
	for _, c := range []struct {
		name  string
		write func(w http.ResponseWriter)
		want  int
	}{
		{"nothing", func(http.ResponseWriter) {}, http.StatusOK},
		{"body only", func(w http.ResponseWriter) { _, _ = io.WriteString(w, "x") }, http.StatusOK},
		{"status", func(w http.ResponseWriter) { w.WriteHeader(http.StatusTeapot) }, http.StatusTeapot},
		{"first status wins", func(w http.ResponseWriter) { w.WriteHeader(http.StatusNotFound); w.WriteHeader(http.StatusOK) }, http.StatusNotFound},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			sw := &StatusWriter{ResponseWriter: rec}
			c.write(sw)
			if sw.Status() != c.want || rec.Code != c.want {
				t.Fatalf("Status %d, recorded %d, want %d", sw.Status(), rec.Code, c.want)
			}
			if sw.Unwrap() != rec {
				t.Fatal("Unwrap")
			}
		})
	}
}
