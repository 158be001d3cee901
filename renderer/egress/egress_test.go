package egress

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
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
