package hop

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// countingFallback counts the requests the fast path hands over.
type countingFallback struct {
	n  atomic.Int32
	rt http.RoundTripper
}

func (f *countingFallback) RoundTrip(r *http.Request) (*http.Response, error) {
	f.n.Add(1)
	return f.rt.RoundTrip(r)
}

// server is an httptest server that counts the connections it accepted.
type server struct {
	*httptest.Server
	conns atomic.Int32
}

func newServer(t *testing.T, h http.HandlerFunc) *server {
	t.Helper()
	s := &server{}
	s.Server = httptest.NewUnstartedServer(h)
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	return s
}

func newTransport(t testing.TB, addr string, mod func(*Config)) (*Transport, *countingFallback) {
	t.Helper()
	fb := &countingFallback{rt: &http.Transport{}}
	cfg := Config{Addr: addr, DialTimeout: time.Second, MaxIdle: 8, IdleTimeout: time.Minute,
		ResponseHeaderTimeout: 5 * time.Second, Fallback: fb}
	if mod != nil {
		mod(&cfg)
	}
	tr, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tr.Close)
	return tr, fb
}

func addrOf(t *testing.T, rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

func do(t *testing.T, tr http.RoundTripper, req *http.Request) (*http.Response, string) {
	t.Helper()
	res, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	b, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	return res, string(b)
}

func get(t *testing.T, base, path string) *http.Request {
	req, err := http.NewRequest(http.MethodGet, base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

func TestGetReusesOneConnection(t *testing.T) {
	var seen sync.Map
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		seen.Store("host", r.Host)
		seen.Store("ua", r.Header.Values("User-Agent"))
		seen.Store("x", r.Header.Get("X-Thing"))
		seen.Store("uri", r.RequestURI)
		w.Header().Set("X-Answer", "yes")
		_, _ = io.WriteString(w, "hello "+r.URL.Path)
	})
	tr, fb := newTransport(t, addrOf(t, s.URL), nil)
	for i := range 20 {
		req := get(t, s.URL, "/a%2Fb/c?q=1&r=%20")
		req.Header.Set("X-Thing", "v")
		req.Header["User-Agent"] = []string{""} // what the ReverseProxy sets to send none
		res, body := do(t, tr, req)
		if res.StatusCode != 200 || body != "hello /a/b/c" || res.Header.Get("X-Answer") != "yes" {
			t.Fatalf("request %d: %d %q %v", i, res.StatusCode, body, res.Header)
		}
	}
	if n := s.conns.Load(); n != 1 {
		t.Errorf("20 sequential requests used %d connections, want 1", n)
	}
	if fb.n.Load() != 0 {
		t.Errorf("fallback used %d times", fb.n.Load())
	}
	if h, _ := seen.Load("host"); h != addrOf(t, s.URL) {
		t.Errorf("Host = %v", h)
	}
	if ua, _ := seen.Load("ua"); len(ua.([]string)) != 0 {
		t.Errorf("User-Agent sent: %v", ua)
	}
	if x, _ := seen.Load("x"); x != "v" {
		t.Errorf("X-Thing = %v", x)
	}
	if u, _ := seen.Load("uri"); u != "/a%2Fb/c?q=1&r=%20" {
		t.Errorf("request URI = %v", u)
	}
}

func TestBodilessAnswersReturnTheConnection(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/204":
			w.WriteHeader(http.StatusNoContent)
		case "/304":
			w.WriteHeader(http.StatusNotModified)
		case "/empty":
			w.Header().Set("Content-Length", "0")
		case "/chunked":
			w.(http.Flusher).Flush()
			_, _ = io.WriteString(w, strings.Repeat("x", 10000))
		default:
			_, _ = io.WriteString(w, "body")
		}
	})
	tr, _ := newTransport(t, addrOf(t, s.URL), nil)
	for _, path := range []string{"/204", "/304", "/empty", "/chunked", "/head"} {
		req := get(t, s.URL, path)
		if path == "/head" {
			req.Method = http.MethodHead
		}
		res, body := do(t, tr, req)
		want := ""
		if path == "/chunked" {
			want = strings.Repeat("x", 10000)
		}
		if body != want {
			t.Errorf("%s: body %q", path, body[:min(len(body), 20)])
		}
		if path == "/chunked" && len(res.TransferEncoding) == 0 {
			t.Errorf("/chunked was not chunked")
		}
	}
	if n := s.conns.Load(); n != 1 {
		t.Errorf("used %d connections, want 1", n)
	}
}

func TestRequestsWithBodiesGoToTheFallback(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		_, _ = io.WriteString(w, r.Method+" "+string(b)+" "+r.Header.Get("Content-Length"))
	})
	tr, fb := newTransport(t, addrOf(t, s.URL), nil)

	req, _ := http.NewRequest(http.MethodPost, s.URL+"/x", strings.NewReader("data"))
	if _, body := do(t, tr, req); body != "POST data 4" {
		t.Errorf("POST with body: %q", body)
	}
	if fb.n.Load() != 1 {
		t.Fatalf("fallback used %d times, want 1", fb.n.Load())
	}
	// Without a body and without an idempotency key a POST is not safe to resend: fallback.
	req, _ = http.NewRequest(http.MethodPost, s.URL+"/x", nil)
	do(t, tr, req)
	req, _ = http.NewRequest(http.MethodDelete, s.URL+"/x", nil)
	do(t, tr, req)
	req = get(t, s.URL, "/ws")
	req.Header.Set("Upgrade", "websocket")
	do(t, tr, req)
	if fb.n.Load() != 4 {
		t.Fatalf("fallback used %d times, want 4", fb.n.Load())
	}
	// With an idempotency key it is: the fast path, with Content-Length: 0.
	req, _ = http.NewRequest(http.MethodPost, s.URL+"/x", nil)
	req.Header.Set("Idempotency-Key", "k1")
	if _, body := do(t, tr, req); body != "POST  0" {
		t.Errorf("POST with key: %q", body)
	}
	if fb.n.Load() != 4 {
		t.Errorf("keyed POST went to the fallback")
	}
}

// rawServer accepts connections on loopback and gives each to serve.
func rawServer(t testing.TB, serve func(n int, c net.Conn)) (string, *atomic.Int32) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int32
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	// The accept loop counts in wg, so its wg.Go calls never race with Wait.
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			k := int(n.Add(1))
			wg.Go(func() {
				defer c.Close()
				serve(k, c)
			})
		}
	})
	return ln.Addr().String(), &n
}

// readRequest reads one request head from br.
func readRequest(br *bufio.Reader) (*http.Request, error) {
	req, err := http.ReadRequest(br)
	if err != nil {
		return nil, err
	}
	_, _ = io.Copy(io.Discard, req.Body)
	return req, nil
}

const okResponse = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"

func TestStaleIdleConnectionIsRetriedOnANewOne(t *testing.T) {
	// Each connection answers one request and then closes without saying so, as a cell does
	// when its idle timeout ends: the pooled connection is dead when the next request uses it.
	addr, conns := rawServer(t, func(_ int, c net.Conn) {
		br := bufio.NewReader(c)
		if _, err := readRequest(br); err != nil {
			return
		}
		_, _ = io.WriteString(c, okResponse)
	})
	tr, _ := newTransport(t, addr, nil)
	for i := range 3 {
		_, body := do(t, tr, get(t, "http://"+addr, "/"))
		if body != "ok" {
			t.Fatalf("request %d: %q", i, body)
		}
		time.Sleep(20 * time.Millisecond) // let the close reach this side
	}
	if n := conns.Load(); n != 3 {
		t.Errorf("%d connections, want 3", n)
	}
}

func TestNoRetryAfterPartOfAnAnswer(t *testing.T) {
	var served atomic.Int32
	addr, _ := rawServer(t, func(k int, c net.Conn) {
		br := bufio.NewReader(c)
		if k == 1 {
			if _, err := readRequest(br); err != nil {
				return
			}
			_, _ = io.WriteString(c, okResponse)
		}
		if _, err := readRequest(br); err != nil {
			return
		}
		served.Add(1)
		_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-")
	})
	tr, _ := newTransport(t, addr, nil)
	do(t, tr, get(t, "http://"+addr, "/"))
	if _, err := tr.RoundTrip(get(t, "http://"+addr, "/")); err == nil {
		t.Fatal("a truncated answer gave no error")
	}
	if n := served.Load(); n != 1 {
		t.Errorf("request served %d times, want 1 (no resend once the cell answered)", n)
	}
}

func TestResponseHeaderTimeout(t *testing.T) {
	addr, _ := rawServer(t, func(_ int, c net.Conn) {
		_, _ = io.Copy(io.Discard, c) // never answers
	})
	tr, _ := newTransport(t, addr, func(c *Config) { c.ResponseHeaderTimeout = 50 * time.Millisecond })
	_, err := tr.RoundTrip(get(t, "http://"+addr, "/"))
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("err = %v, want a timeout", err)
	}
}

func TestCancelWhileWaitingForHeaders(t *testing.T) {
	addr, _ := rawServer(t, func(_ int, c net.Conn) {
		_, _ = io.Copy(io.Discard, c) // never answers
	})
	tr, _ := newTransport(t, addr, nil)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(20*time.Millisecond, cancel)
	_, err := tr.RoundTrip(get(t, "http://"+addr, "/").WithContext(ctx))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	tr.mu.Lock()
	n := len(tr.conns)
	tr.mu.Unlock()
	if n != 0 {
		t.Errorf("%d connections still open after the cancel", n)
	}
}

func TestCancelMidBodyClosesTheConnection(t *testing.T) {
	addr, conns := rawServer(t, func(_ int, c net.Conn) {
		br := bufio.NewReader(c)
		if _, err := readRequest(br); err != nil {
			return
		}
		_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc")
		_, _ = io.Copy(io.Discard, br) // stalls mid-body until the client closes
	})
	tr, _ := newTransport(t, addr, nil)
	ctx, cancel := context.WithCancel(context.Background())
	req := get(t, "http://"+addr, "/").WithContext(ctx)
	res, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 3)
	if _, err := io.ReadFull(res.Body, buf); err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(20*time.Millisecond, cancel)
	if _, err := io.ReadAll(res.Body); !errors.Is(err, context.Canceled) {
		t.Fatalf("reading a stalled body after cancel: %v, want context.Canceled", err)
	}
	res.Body.Close()
	if _, err := res.Body.Read(buf); err == nil {
		t.Error("read after close gave no error")
	}
	if len(tr.idle) != 0 {
		t.Errorf("a canceled connection was pooled")
	}
	_ = conns
}

func TestCanceledBeforeSending(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {})
	tr, _ := newTransport(t, addrOf(t, s.URL), nil)
	do(t, tr, get(t, s.URL, "/")) // pool one connection
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := tr.RoundTrip(get(t, s.URL, "/").WithContext(ctx)); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

func TestBodyClosedEarlyIsNotReused(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, strings.Repeat("y", 100000))
	})
	tr, _ := newTransport(t, addrOf(t, s.URL), nil)
	res, err := tr.RoundTrip(get(t, s.URL, "/"))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = res.Body.Read(make([]byte, 10))
	res.Body.Close()
	do(t, tr, get(t, s.URL, "/"))
	if n := s.conns.Load(); n != 2 {
		t.Errorf("%d connections, want 2 (the half-read one is not reused)", n)
	}
}

func TestConnectionCloseIsHonoured(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close")
		_, _ = io.WriteString(w, "bye")
	})
	tr, _ := newTransport(t, addrOf(t, s.URL), nil)
	do(t, tr, get(t, s.URL, "/"))
	do(t, tr, get(t, s.URL, "/"))
	if n := s.conns.Load(); n != 2 {
		t.Errorf("%d connections, want 2", n)
	}
	if len(tr.idle) != 0 {
		t.Errorf("a closing connection was pooled")
	}
}

func TestInformationalAnswersAreSkipped(t *testing.T) {
	addr, _ := rawServer(t, func(_ int, c net.Conn) {
		br := bufio.NewReader(c)
		if _, err := readRequest(br); err != nil {
			return
		}
		_, _ = io.WriteString(c, "HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n"+okResponse)
	})
	tr, _ := newTransport(t, addr, nil)
	res, body := do(t, tr, get(t, "http://"+addr, "/"))
	if res.StatusCode != 200 || body != "ok" {
		t.Fatalf("%d %q", res.StatusCode, body)
	}
}

func TestEndlessInformationalAnswersFail(t *testing.T) {
	addr, _ := rawServer(t, func(_ int, c net.Conn) {
		br := bufio.NewReader(c)
		if _, err := readRequest(br); err != nil {
			return
		}
		_, _ = io.WriteString(c, strings.Repeat("HTTP/1.1 103 Early Hints\r\n\r\n", 10)+okResponse)
	})
	tr, _ := newTransport(t, addr, nil)
	if _, err := tr.RoundTrip(get(t, "http://"+addr, "/")); err == nil {
		t.Fatal("ten 1xx answers were accepted")
	}
}

func TestInvalidHeadersAreNotSent(t *testing.T) {
	addr, conns := rawServer(t, func(_ int, c net.Conn) {
		br := bufio.NewReader(c)
		for {
			if _, err := readRequest(br); err != nil {
				return
			}
			_, _ = io.WriteString(c, okResponse)
		}
	})
	tr, _ := newTransport(t, addr, nil)
	for _, h := range []http.Header{
		{"X-Bad": {"a\r\nX-Injected: 1"}},
		{"X-Bad": {"a\nb"}},
		{"Bad Name": {"v"}},
		{"X-Nul": {"a\x00b"}},
	} {
		req := get(t, "http://"+addr, "/")
		req.Header = h
		if _, err := tr.RoundTrip(req); err == nil {
			t.Errorf("header %v was sent", h)
		}
	}
	_ = conns
}

func TestMaxIdleAndConcurrentUse(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(time.Millisecond)
		_, _ = io.WriteString(w, r.URL.Query().Get("i"))
	})
	tr, _ := newTransport(t, addrOf(t, s.URL), func(c *Config) { c.MaxIdle = 4 })
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for i := range 20 {
				want := string(rune('a'+g)) + string(rune('a'+i))
				res, err := tr.RoundTrip(get(t, s.URL, "/?i="+want))
				if err != nil {
					t.Error(err)
					return
				}
				b, _ := io.ReadAll(res.Body)
				res.Body.Close()
				if string(b) != want {
					t.Errorf("got %q, want %q (answers crossed)", b, want)
				}
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("320 round trips did not finish within 30s")
	}
	tr.mu.Lock()
	n := len(tr.idle)
	tr.mu.Unlock()
	if n > 4 {
		t.Errorf("%d idle connections, want at most 4", n)
	}
}

func TestIdleTimeoutEvictsOldConnections(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "x") })
	tr, _ := newTransport(t, addrOf(t, s.URL), func(c *Config) { c.IdleTimeout = 30 * time.Millisecond })
	// Two connections in the pool.
	r1, _ := tr.RoundTrip(get(t, s.URL, "/"))
	r2, _ := tr.RoundTrip(get(t, s.URL, "/"))
	io.ReadAll(r1.Body)
	io.ReadAll(r2.Body)
	if len(tr.idle) != 2 {
		t.Fatalf("%d idle, want 2", len(tr.idle))
	}
	time.Sleep(60 * time.Millisecond)
	do(t, tr, get(t, s.URL, "/")) // takes the newest; putting it back evicts the old one
	if len(tr.idle) != 1 {
		t.Errorf("%d idle after the timeout, want 1", len(tr.idle))
	}
}

func TestCloseStopsPooling(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {})
	tr, _ := newTransport(t, addrOf(t, s.URL), nil)
	res, err := tr.RoundTrip(get(t, s.URL, "/"))
	if err != nil {
		t.Fatal(err)
	}
	tr.Close()
	io.ReadAll(res.Body)
	if len(tr.idle) != 0 {
		t.Errorf("pooled after Close")
	}
}

func TestCancelAfterCloseStillWorks(t *testing.T) {
	addr, _ := rawServer(t, func(_ int, c net.Conn) {
		_, _ = io.Copy(io.Discard, c) // never answers
	})
	tr, _ := newTransport(t, addr, nil)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := tr.RoundTrip(get(t, "http://"+addr, "/").WithContext(ctx))
		errc <- err
	}()
	time.Sleep(20 * time.Millisecond)
	tr.Close() // the cell was removed from the router while the request waits
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a canceled request on a closed transport kept waiting")
	}
}

func TestBytesAfterAnAnswerAreNotTheNextAnswer(t *testing.T) {
	addr, conns := rawServer(t, func(k int, c net.Conn) {
		br := bufio.NewReader(c)
		for {
			req, err := readRequest(br)
			if err != nil {
				return
			}
			if req.Method == http.MethodHead {
				// A broken cell: an extra answer nobody asked for right after the HEAD's.
				_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n"+
					"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nstale")
				continue
			}
			_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfresh")
		}
	})
	tr, _ := newTransport(t, addr, nil)
	req := get(t, "http://"+addr, "/")
	req.Method = http.MethodHead
	do(t, tr, req)
	if _, body := do(t, tr, get(t, "http://"+addr, "/")); body != "fresh" {
		t.Errorf("GET after the HEAD got %q, want fresh", body)
	}
	if n := conns.Load(); n != 2 {
		t.Errorf("%d connections, want 2 (the one with leftover bytes is not pooled)", n)
	}
}

func TestIdleConnectionsPastTheirTimeoutAreNotUsed(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "x") })
	tr, _ := newTransport(t, addrOf(t, s.URL), func(c *Config) { c.IdleTimeout = 30 * time.Millisecond })
	do(t, tr, get(t, s.URL, "/"))
	time.Sleep(60 * time.Millisecond)
	do(t, tr, get(t, s.URL, "/"))
	if n := s.conns.Load(); n != 2 {
		t.Errorf("%d connections, want 2 (the expired one is not reused)", n)
	}
}

func TestReadAfterTheEndKeepsReturningEOF(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "abc") })
	tr, _ := newTransport(t, addrOf(t, s.URL), nil)
	res, err := tr.RoundTrip(get(t, s.URL, "/"))
	if err != nil {
		t.Fatal(err)
	}
	if b, err := io.ReadAll(res.Body); err != nil || string(b) != "abc" {
		t.Fatalf("%q, %v", b, err)
	}
	if _, err := res.Body.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("read after the end: %v, want io.EOF", err)
	}
	res.Body.Close()
}

func TestHugeResponseHeadersFail(t *testing.T) {
	addr, _ := rawServer(t, func(_ int, c net.Conn) {
		br := bufio.NewReader(c)
		if _, err := readRequest(br); err != nil {
			return
		}
		_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nX-Big: "+strings.Repeat("a", 2*MaxHeaderBytes)+"\r\n\r\n")
	})
	tr, _ := newTransport(t, addr, nil)
	if _, err := tr.RoundTrip(get(t, "http://"+addr, "/")); !errors.Is(err, errHeadersTooLarge) {
		t.Fatalf("err = %v, want errHeadersTooLarge", err)
	}
}

func TestInvalidHostIsNotSent(t *testing.T) {
	for _, host := range []string{"a b", "a/b", "a\x00"} {
		req := get(t, "http://127.0.0.1:1", "/")
		req.Host = host
		if err := writeRequest(bufio.NewWriter(io.Discard), req); err == nil {
			t.Errorf("Host %q accepted", host)
		}
	}
}

func TestPooledConnectionSendsAndWaitsInOneRead(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, r.URL.Path) })
	tr, _ := newTransport(t, addrOf(t, s.URL), nil)
	for i, path := range []string{"/one", "/two", "/three"} {
		if _, body := do(t, tr, get(t, s.URL, path)); body != path {
			t.Fatalf("request %d: body %q, want %q", i, body, path)
		}
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if len(tr.idle) != 1 {
		t.Fatalf("%d idle connections, want 1", len(tr.idle))
	}
	if c := tr.idle[0]; c.rc == nil || !c.recent {
		t.Errorf("the reused connection did not take the one-read path (raw conn %v, recent %v)", c.rc != nil, c.recent)
	}
	if n := s.conns.Load(); n != 1 {
		t.Errorf("%d connections, want 1", n)
	}
}

// pooledThenSilent answers the first request on each connection and then reads without ever
// answering again.
func pooledThenSilent(t *testing.T) string {
	addr, _ := rawServer(t, func(_ int, c net.Conn) {
		br := bufio.NewReader(c)
		if _, err := readRequest(br); err != nil {
			return
		}
		_, _ = io.WriteString(c, okResponse)
		_, _ = io.Copy(io.Discard, br)
	})
	return addr
}

func TestCancelWhileWaitingOnAPooledConnection(t *testing.T) {
	addr := pooledThenSilent(t)
	tr, _ := newTransport(t, addr, nil)
	do(t, tr, get(t, "http://"+addr, "/"))
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(20*time.Millisecond, cancel)
	_, err := tr.RoundTrip(get(t, "http://"+addr, "/").WithContext(ctx))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

func TestResponseHeaderTimeoutOnAPooledConnection(t *testing.T) {
	addr := pooledThenSilent(t)
	tr, _ := newTransport(t, addr, func(c *Config) { c.ResponseHeaderTimeout = 50 * time.Millisecond })
	do(t, tr, get(t, "http://"+addr, "/"))
	_, err := tr.RoundTrip(get(t, "http://"+addr, "/"))
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("err = %v, want a timeout", err)
	}
}

func TestLargeRequestOnAPooledConnection(t *testing.T) {
	// A request far larger than the socket takes at once: the one-read path writes part of it
	// and the rest goes out the plain way. The cell reads it late, so the buffers fill first.
	const headers, size = 8, 640 << 10
	got := make(chan int, 2)
	addr, _ := rawServer(t, func(_ int, c net.Conn) {
		br := bufio.NewReader(c)
		for i := 0; ; i++ {
			if i > 0 {
				time.Sleep(50 * time.Millisecond)
			}
			req, err := readRequest(br)
			if err != nil {
				return
			}
			got <- len(req.Header)
			_, _ = io.WriteString(c, okResponse)
		}
	})
	tr, _ := newTransport(t, addr, func(c *Config) { c.ResponseHeaderTimeout = time.Minute })
	do(t, tr, get(t, "http://"+addr, "/"))
	<-got
	req := get(t, "http://"+addr, "/")
	v := strings.Repeat("v", size)
	for i := range headers {
		req.Header.Set(fmt.Sprintf("X-Large-%d", i), v)
	}
	if _, body := do(t, tr, req); body != "ok" {
		t.Fatalf("body %q", body)
	}
	if n := <-got; n < headers {
		t.Errorf("the cell saw %d headers, want at least %d", n, headers)
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for _, c := range tr.idle {
		if cap(c.out.b) > maxKeptRequestBuffer {
			t.Errorf("a pooled connection keeps a %d-byte request buffer", cap(c.out.b))
		}
	}
}

// TestReadHeadParsesCommonAnswersItself: a cell's usual answer is parsed by readHead's own
// parser, with fewer allocations than http.ReadResponse's, and what it does not take (an
// informational answer, a chunked body, a HEAD request) goes to http.ReadResponse.
func TestReadHeadParsesCommonAnswersItself(t *testing.T) {
	const common = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nDate: Sat, 28 Nov 2026 12:00:00 GMT\r\n" +
		"X-Request-Id: 0af7651916cd43dd8448eb211c80319c\r\nContent-Length: 2\r\n\r\n{}"
	get := &http.Request{Method: http.MethodGet}
	read := func(raw string, req *http.Request) (*http.Response, bool) {
		res, fast, err := readHead(bufio.NewReader(strings.NewReader(raw)), req)
		if err != nil {
			t.Fatalf("%q: %v", raw, err)
		}
		return res, fast
	}
	res, fast := read(common, get)
	if !fast || res.StatusCode != 200 || res.ContentLength != 2 || res.Header.Get("X-Request-Id") == "" {
		t.Fatalf("fast %v, %d, length %d, headers %q: want the fast path's 200 of length 2", fast, res.StatusCode, res.ContentLength, res.Header)
	}
	for _, raw := range []string{
		"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
		"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n",
	} {
		if _, fast := read(raw, get); fast {
			t.Errorf("%q took the fast path", raw)
		}
	}
	if _, fast := read(common, &http.Request{Method: http.MethodHead}); fast {
		t.Error("the answer to a HEAD took the fast path")
	}

	br := bufio.NewReader(nil)
	src := strings.NewReader(common)
	allocs := func(parse func()) float64 {
		return testing.AllocsPerRun(100, func() {
			src.Reset(common)
			br.Reset(src)
			parse()
		})
	}
	own := allocs(func() { _, _, _ = readHead(br, get) })
	std := allocs(func() { _, _ = http.ReadResponse(br, get) })
	// The response, the header map (two: its header and its table), the string of the head and
	// the values slice.
	if own > 5 || own >= std {
		t.Errorf("readHead allocates %v times per answer, http.ReadResponse %v: want at most 5, and fewer", own, std)
	}
}
