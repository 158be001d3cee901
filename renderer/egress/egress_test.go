package egress

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"slidecells/shared/testenv"
)

func TestOnlyAllowedOriginsPass(t *testing.T) {
	var allowedHits, otherHits atomic.Int64
	allowed := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		allowedHits.Add(1)
		if r.Header.Get("Proxy-Authorization") != "" {
			t.Error("proxy credentials forwarded")
		}
		if r.URL.Path == "/redirect" {
			http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/", http.StatusFound)
			return
		}
		fmt.Fprint(w, "ok")
	}))
	defer allowed.Close()
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { otherHits.Add(1) }))
	defer other.Close()
	p, err := New([]string{allowed.URL})
	if err != nil {
		t.Fatal(err)
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	p.Serve(ln)
	defer p.Close()

	raw := func(req string) string {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprint(c, req)
		line, _ := bufio.NewReader(c).ReadString('\n')
		return strings.TrimSpace(line)
	}
	ah := strings.TrimPrefix(allowed.URL, "http://")
	oh := strings.TrimPrefix(other.URL, "http://")
	cases := []struct{ name, req, want string }{
		{"allowed origin", "GET " + allowed.URL + "/x HTTP/1.1\r\nHost: " + ah + "\r\nProxy-Authorization: Basic eA==\r\n\r\n", "HTTP/1.1 200 OK"},
		{"redirect passed back, not followed", "GET " + allowed.URL + "/redirect HTTP/1.1\r\nHost: " + ah + "\r\n\r\n", "HTTP/1.1 302 Found"},
		{"other loopback port", "GET " + other.URL + "/ HTTP/1.1\r\nHost: " + oh + "\r\n\r\n", "HTTP/1.1 403 Forbidden"},
		{"metadata address", "GET http://169.254.169.254/latest/meta-data/ HTTP/1.1\r\nHost: 169.254.169.254\r\n\r\n", "HTTP/1.1 403 Forbidden"},
		{"name not listed", "GET http://metadata.google.internal/ HTTP/1.1\r\nHost: metadata.google.internal\r\n\r\n", "HTTP/1.1 403 Forbidden"},
		{"websocket upgrade to the allowed origin", "GET " + allowed.URL + "/ws HTTP/1.1\r\nHost: " + ah + "\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n", "HTTP/1.1 403 Forbidden"},
		{"tunnel to the allowed http origin", "CONNECT " + ah + " HTTP/1.1\r\nHost: " + ah + "\r\n\r\n", "HTTP/1.1 403 Forbidden"},
		{"tunnel elsewhere", "CONNECT 169.254.169.254:443 HTTP/1.1\r\nHost: 169.254.169.254:443\r\n\r\n", "HTTP/1.1 403 Forbidden"},
		{"origin-form request", "GET / HTTP/1.1\r\nHost: " + ah + "\r\n\r\n", "HTTP/1.1 403 Forbidden"},
		{"other scheme", "GET ftp://" + ah + "/ HTTP/1.1\r\nHost: " + ah + "\r\n\r\n", "HTTP/1.1 403 Forbidden"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := raw(c.req); got != c.want {
				t.Fatalf("%s: got %q, want %q", c.name, got, c.want)
			}
		})
	}
	if otherHits.Load() != 0 {
		t.Fatalf("other origin reached %d times", otherHits.Load())
	}
	if allowedHits.Load() != 2 {
		t.Fatalf("allowed origin reached %d times, want 2", allowedHits.Load())
	}
	if p.Blocked() != 8 {
		t.Fatalf("blocked = %d, want 8", p.Blocked())
	}
}

func TestConnectToAllowedHTTPSOrigin(t *testing.T) {
	tls := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "secure") }))
	defer tls.Close()
	p, err := New([]string{tls.URL})
	if err != nil {
		t.Fatal(err)
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	p.Serve(ln)
	defer p.Close()
	client := tls.Client()
	client.Transport.(*http.Transport).Proxy = http.ProxyURL(mustURL("http://" + ln.Addr().String()))
	resp, err := client.Get(tls.URL + "/x")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
}

func mustURL(s string) *url.URL {
	u, err := url.Parse(s)
	if err != nil {
		panic(err)
	}
	return u
}

// serve starts a proxy of pol on loopback.
func serve(t *testing.T, pol *Policy) (*Proxy, string) {
	t.Helper()
	p := pol.Proxy()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.Serve(ln)
	t.Cleanup(func() { p.Close() })
	return p, ln.Addr().String()
}

// TestByteLimitCutsTheAttemptOff: the bytes through the proxy, requests,
// responses and tunnels together, stop at the limit: the transfer that
// crosses it is cut there, every connection closes, and new connections
// close at once.
func TestByteLimitCutsTheAttemptOff(t *testing.T) {
	big := strings.Repeat("x", 1<<20)
	var hits atomic.Int64
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if r.URL.Path == "/small" {
			fmt.Fprint(w, "ok")
			return
		}
		fmt.Fprint(w, big)
	})
	for _, tc := range []struct {
		name string
		srv  *httptest.Server
	}{{"http", httptest.NewServer(h)}, {"tunnel", httptest.NewTLSServer(h)}} {
		t.Run(tc.name, func(t *testing.T) {
			defer tc.srv.Close()
			hits.Store(0)
			const limit = 64 << 10
			pol, err := NewPolicy([]string{tc.srv.URL}, Limits{MaxBytes: limit})
			if err != nil {
				t.Fatal(err)
			}
			p, addr := serve(t, pol)
			client := tc.srv.Client()
			client.Transport.(*http.Transport).Proxy = http.ProxyURL(mustURL("http://" + addr))
			resp, err := client.Get(tc.srv.URL + "/small")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if string(body) != "ok" || p.LimitHit() != "" {
				t.Fatalf("small response = %q, limit hit %q", body, p.LimitHit())
			}
			got := 0
			if resp, err := client.Get(tc.srv.URL + "/big"); err == nil {
				n, _ := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				got = int(n)
			}
			if got >= len(big) || p.LimitHit() != LimitBytes || p.Bytes() > limit {
				t.Fatalf("big response: %d of %d bytes through, %d counted, limit hit %q", got, len(big), p.Bytes(), p.LimitHit())
			}
			before := hits.Load()
			client.CloseIdleConnections()
			if resp, err := client.Get(tc.srv.URL + "/small"); err == nil {
				resp.Body.Close()
				if resp.StatusCode != http.StatusForbidden {
					t.Fatalf("a request after the limit = %d, want 403", resp.StatusCode)
				}
			}
			if hits.Load() != before {
				t.Fatal("the origin was reached after the limit")
			}
		})
	}
}

// TestConnectionLimit: past the limit of open connections a new one is
// answered 429 and closed without reaching the origin; when one closes, a
// new one is served.
func TestConnectionLimit(t *testing.T) {
	var hits atomic.Int64
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1); fmt.Fprint(w, "ok") }))
	defer origin.Close()
	pol, err := NewPolicy([]string{origin.URL}, Limits{MaxConnections: 2})
	if err != nil {
		t.Fatal(err)
	}
	p, addr := serve(t, pol)
	req := "GET " + origin.URL + "/ HTTP/1.1\r\nHost: " + strings.TrimPrefix(origin.URL, "http://") + "\r\n\r\n"
	// open sends a request on a new connection and returns it with the
	// status line.
	open := func() (net.Conn, string) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprint(c, req)
		br := bufio.NewReader(c)
		line, _ := br.ReadString('\n')
		if line != "" {
			// Keep the connection open (keep-alive): read the rest.
			resp, err := http.ReadResponse(bufio.NewReader(io.MultiReader(strings.NewReader(line), br)), nil)
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
			}
		}
		return c, strings.TrimSpace(line)
	}
	a, sa := open()
	b, sb := open()
	if sa != "HTTP/1.1 200 OK" || sb != "HTTP/1.1 200 OK" || p.LimitHit() != "" {
		t.Fatalf("first two connections: %q %q, limit hit %q", sa, sb, p.LimitHit())
	}
	c, sc := open()
	c.Close()
	if sc != "HTTP/1.1 429 Too Many Requests" || p.LimitHit() != LimitConnections || hits.Load() != 2 {
		t.Fatalf("third connection: %q, limit hit %q, origin reached %d times", sc, p.LimitHit(), hits.Load())
	}
	a.Close()
	testenv.Eventually(t, 5*time.Second, 10*time.Millisecond, "a connection served after one closed", func() error {
		d, sd := open()
		d.Close()
		if sd != "HTTP/1.1 200 OK" {
			return fmt.Errorf("status line %q", sd)
		}
		return nil
	})
	b.Close()
}
