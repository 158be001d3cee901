package h1

import (
	"bufio"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestHandOffAsNetHTTP sends what the loop must leave to net/http: the answers must be net/http's
// own, and a connection handed over mid-way must lose no bytes.
func TestHandOffAsNetHTTP(t *testing.T) {
	one := func(send string, methods ...string) []step { return []step{{send: send, read: methods}} }
	chunked := "POST /c HTTP/1.1\r\nHost: example.com\r\nTransfer-Encoding: chunked\r\n\r\n" +
		"5\r\nhello\r\n7\r\n, world\r\n0\r\n\r\n"
	bigHead := "GET /big HTTP/1.1\r\nHost: example.com\r\nX: " + strings.Repeat("v", 6<<10) + "\r\n\r\n"
	// sized is a GET head of n bytes exactly.
	sized := func(n int) string {
		h := "GET / HTTP/1.1\r\nHost: example.com\r\nX: "
		return h + strings.Repeat("v", n-len(h)-4) + "\r\n\r\n"
	}
	runDiff(t, []diffCase{
		{name: "head of 4096 bytes", h: echo, steps: one(sized(bufSize)+get, "GET", "GET")},
		{name: "head of 4097 bytes", h: echo, steps: one(sized(bufSize+1)+get, "GET", "GET")},
		{name: "head of 4096 bytes after another", h: echo, steps: one(get+sized(bufSize)+get, "GET", "GET", "GET")},
		{name: "HTTP/1.0", h: echo, steps: one("GET /old HTTP/1.0\r\nHost: example.com\r\n\r\n", "GET")},
		{name: "HTTP/1.0 keep-alive", h: echo, steps: []step{
			{send: "GET /old HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", read: []string{"GET"}},
			{send: "GET /again HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", read: []string{"GET"}},
		}},
		{name: "chunked upload", h: echo, steps: one(chunked, "POST")},
		{name: "expect 100-continue", h: echo, steps: []step{
			{send: "PUT /e HTTP/1.1\r\nHost: example.com\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n",
				read: []string{"PUT"}},
			{send: "hello", read: []string{"PUT"}},
		}},
		{name: "6 KiB head", h: echo, steps: one(bigHead, "GET")},
		{name: "head over MaxHeaderBytes", h: echo, steps: one(
			"GET / HTTP/1.1\r\nHost: example.com\r\nX: "+strings.Repeat("v", 16<<10)+"\r\n\r\n", "GET"),
			set: func(s *http.Server) { s.MaxHeaderBytes = 1 << 10 }},
		{name: "3 KiB head, MaxHeaderBytes 1 KiB", h: echo, steps: one(
			"GET / HTTP/1.1\r\nHost: example.com\r\nX: "+strings.Repeat("v", 3<<10)+"\r\n\r\n", "GET"),
			set: func(s *http.Server) { s.MaxHeaderBytes = 1 << 10 }}, // net/http allows 4 KiB more
		{name: "absolute form", h: echo, steps: one("GET http://other/x HTTP/1.1\r\nHost: example.com\r\n\r\n", "GET")},
		{name: "OPTIONS *", h: echo, steps: one("OPTIONS * HTTP/1.1\r\nHost: example.com\r\n\r\n", "OPTIONS")},
		{name: "no Host", h: echo, steps: one("GET / HTTP/1.1\r\nX: y\r\n\r\n", "GET")},
		{name: "two Hosts", h: echo, steps: one("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", "GET")},
		{name: "bad Host", h: echo, steps: one("GET / HTTP/1.1\r\nHost: a b\r\n\r\n", "GET")},
		{name: "bad header name", h: echo, steps: one("GET / HTTP/1.1\r\nHost: a\r\nBad Name: x\r\n\r\n", "GET")},
		{name: "bad header value", h: echo, steps: one("GET / HTTP/1.1\r\nHost: a\r\nX: a\x01b\r\n\r\n", "GET")},
		{name: "obs-fold", h: echo, steps: one("GET / HTTP/1.1\r\nHost: a\r\nX: a\r\n b\r\n\r\n", "GET")},
		{name: "two lengths", h: echo, steps: one(
			"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc", "POST")},
		{name: "bad length", h: echo, steps: one("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: -3\r\n\r\n", "POST")},
		{name: "bare LF in one line", h: echo, steps: one("GET / HTTP/1.1\r\nHost: a\nX: y\r\n\r\n", "GET")},
		{name: "bare LF throughout", h: echo, steps: one("GET / HTTP/1.1\nHost: a\nX: y\n\n", "GET")},
		{name: "bare LF ending", h: echo, steps: one("GET / HTTP/1.1\r\nHost: a\r\n\n", "GET")},
		{name: "HTTP/2 preface", h: echo, steps: one("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "GET")},
		{name: "HTTP/1.2", h: echo, steps: one("GET / HTTP/1.2\r\nHost: a\r\n\r\n", "GET")},
		{name: "head cut by the client", h: echo, steps: []step{
			{send: "GET / HTTP/1.1\r\nHost: a\r\n", closeWrite: true, read: []string{"GET"}},
		}},
		{name: "request then half-close", h: echo, steps: []step{
			{send: get, closeWrite: true, read: []string{"GET", "GET"}},
		}},
		{name: "request line cut by the client", h: echo, steps: []step{
			{send: "GET / HTT", closeWrite: true, read: []string{"GET"}},
		}},
		{name: "plain then chunked", h: echo, steps: []step{
			{send: get, read: []string{"GET"}},
			{send: chunked, read: []string{"POST"}},
		}},
		{name: "plain then chunked, one write", h: echo, steps: []step{
			{send: get + chunked + get, read: []string{"GET", "POST", "GET"}},
		}},
		{name: "plain body then expect", h: echo, steps: []step{
			{send: "POST /a HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc" +
				"PUT /e HTTP/1.1\r\nHost: b\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n",
				read: []string{"POST", "PUT"}},
			{send: "ok", read: []string{"PUT"}},
		}},
		{name: "plain then 6 KiB head", h: echo, steps: []step{
			{send: get + bigHead, read: []string{"GET", "GET"}},
		}},
	})
}

// TestUpgrade: an upgrade goes to net/http, whose handler hijacks the connection and talks
// raw on it.
func TestUpgrade(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "echo" {
			http.Error(w, "upgrade expected", http.StatusBadRequest)
			return
		}
		nc, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Errorf("hijack: %v", err)
			return
		}
		defer nc.Close()
		_, _ = brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n")
		_ = brw.Flush()
		line, err := brw.ReadString('\n')
		if err != nil {
			t.Errorf("reading the upgraded stream: %v", err)
			return
		}
		_, _ = brw.WriteString("echo: " + line)
		_ = brw.Flush()
	})
	_, addr, _ := startH1(t, h, nil)
	c := dial(t, addr)
	// A plain request first: the loop serves it, then hands the connection over.
	c.send(get)
	if resp, body := c.mustRead("GET"); resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "upgrade expected") {
		t.Fatalf("plain request: %d %q", resp.StatusCode, body)
	}
	c.send("GET /ws HTTP/1.1\r\nHost: example.com\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\nping\n")
	resp, err := http.ReadResponse(c.br, &http.Request{Method: "GET"})
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("status %d, want 101", resp.StatusCode)
	}
	line, err := c.br.ReadString('\n')
	if err != nil || line != "echo: ping\n" {
		t.Fatalf("upgraded stream: %q, %v", line, err)
	}
	if rest, _ := io.ReadAll(bufio.NewReader(c.br)); len(rest) != 0 {
		t.Fatalf("after the upgraded stream: %q", rest)
	}
}

// TestWhoServes: plain requests are the loop's, the rest net/http's (the comparisons with
// net/http pass either way, so this holds the loop to its share).
func TestWhoServes(t *testing.T) {
	_, addr, _ := startH1(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if _, ok := w.(*response); ok {
			_, _ = io.WriteString(w, "loop")
		} else {
			_, _ = io.WriteString(w, "net/http")
		}
	}), nil)
	head := func(n int) string {
		h := "GET / HTTP/1.1\r\nHost: example.com\r\nX: "
		return h + strings.Repeat("v", n-len(h)-4) + "\r\n\r\n"
	}
	for _, c := range []struct{ req, want string }{
		{get, "loop"},
		{"POST /p?q HTTP/1.1\r\nHost: a:1\r\nContent-Length: 3\r\nConnection: keep-alive\r\n\r\nabc", "loop"},
		{"HEAD / HTTP/1.1\r\nHost: a\r\n\r\n", "loop"},
		{head(bufSize), "loop"},
		{head(bufSize + 1), "net/http"},
		{"GET / HTTP/1.0\r\nHost: a\r\nConnection: keep-alive\r\n\r\n", "net/http"},
		{"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", "net/http"},
		{"GET http://a/ HTTP/1.1\r\nHost: a\r\n\r\n", "net/http"},
		{"GET / HTTP/1.1\r\nHost: a\r\nTrailer: X\r\n\r\n", "net/http"},
		{"GET / HTTP/1.1\nHost: a\n\n", "net/http"},
	} {
		cl := dial(t, addr)
		cl.send(c.req)
		method := strings.Fields(c.req)[0]
		if _, body := cl.mustRead(method); body != c.want && !(method == "HEAD" && body == "") {
			t.Errorf("%q served by %s, want %s", c.req, body, c.want)
		}
		// The connection stays with whoever took it.
		cl.send(get)
		if _, body := cl.mustRead("GET"); body != c.want {
			t.Errorf("after %q: next request served by %s, want %s", c.req, body, c.want)
		}
	}
}
