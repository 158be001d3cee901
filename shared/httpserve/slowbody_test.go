package httpserve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"slidecells/shared/testenv"
)

// TestSlowBodiesAreCutOff: many connections on loopback declare a 1,000-byte body and send 8
// bytes. Those whose handler reads the body get 408 once the body deadline passes and are
// closed; those answered without reading it (a 401 before the body) get their answer at once
// with Connection: close and are closed; meanwhile other clients are served.
func TestSlowBodiesAreCutOff(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lim := Limits{BodyTimeout: 2 * time.Second, MinBodyRate: 1 << 20, MaxConns: 24}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/unauthenticated" {
			http.Error(w, "no token", http.StatusUnauthorized)
			return
		}
		if _, err := io.ReadAll(r.Body); err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				http.Error(w, "body too slow", http.StatusRequestTimeout)
				return
			}
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
		_, _ = io.WriteString(w, "ok")
	})
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- RunLimited(ctx, ln, h, 5*time.Second, lim) }()
	defer func() { stop(); <-done }()
	addr := ln.Addr().String()

	type outcome struct {
		status int
		closed bool
		err    error
	}
	slow := func(path string) outcome {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return outcome{err: err}
		}
		defer c.Close()
		_ = c.SetWriteDeadline(time.Now().Add(60 * time.Second)) // the test's own bound
		fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n12345678", path)
		// The server closes the connection: the next read ends (EOF), it does not hang.
		a, err := testenv.ReadAnswer(c, 60*time.Second)
		return outcome{status: a.Status, closed: a.Closed, err: err}
	}
	const n = 10
	var wg sync.WaitGroup
	results := make([]outcome, 2*n)
	for i := range n {
		wg.Go(func() { results[i] = slow("/upload") })
		wg.Go(func() { results[n+i] = slow("/unauthenticated") })
	}
	// Meanwhile others are served.
	served := 0
	client := &http.Client{Timeout: 30 * time.Second}
	for range 20 {
		resp, err := client.Post("http://"+addr+"/upload", "text/plain", strings.NewReader("hello"))
		if err != nil {
			t.Fatalf("a normal client: %v", err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) == "ok" {
			served++
		}
	}
	if served != 20 {
		t.Fatalf("normal clients served: %d of 20", served)
	}
	wg.Wait()
	for i, o := range results {
		want := http.StatusRequestTimeout
		if i >= n {
			want = http.StatusUnauthorized
		}
		if o.err != nil || o.status != want || !o.closed {
			t.Errorf("slow client %d: %+v (want %d and closed)", i, o, want)
		}
	}
}

// TestBodyRateLetsASteadyBodyThrough: a body that arrives in pieces, each well within the
// rate after the grace, is read whole, although it takes longer than the grace in all; and a
// handler that works past the grace after reading its body is not cancelled (the deadline is
// cleared at the end of the body).
func TestBodyRateLetsASteadyBodyThrough(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lim := Limits{BodyTimeout: 300 * time.Millisecond, MinBodyRate: 100}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusRequestTimeout)
			return
		}
		select { // work on past the grace: the request must not be cancelled
		case <-time.After(600 * time.Millisecond):
		case <-r.Context().Done():
			http.Error(w, "cancelled", http.StatusServiceUnavailable)
			return
		}
		_, _ = fmt.Fprintf(w, "%d", len(b))
	})
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- RunLimited(ctx, ln, h, 5*time.Second, lim) }()
	defer func() { stop(); <-done }()
	pr, pw := io.Pipe()
	go func() {
		for range 5 { // 5 × 20 bytes, one piece every 150 ms: 750 ms in all, 133 B/s
			_, _ = pw.Write([]byte(strings.Repeat("x", 20)))
			time.Sleep(150 * time.Millisecond)
		}
		pw.Close()
	}()
	req, _ := http.NewRequest(http.MethodPost, "http://"+ln.Addr().String()+"/", pr)
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(b) != "100" {
		t.Fatalf("steady body: %d %q, want 200 \"100\"", resp.StatusCode, b)
	}
}
