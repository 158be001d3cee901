package hop

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// FuzzWriteRequest checks the request writer against net/http's request parser, as a cell
// reads what the router sends: whatever writeRequest accepts must parse as exactly one request
// (no second request smuggled in through a header, host or target) with the method, target,
// host, headers and Connection: close that were asked for; whatever it refuses must leave
// nothing written.
//
// `make test` runs it briefly (see FUZZ_PACKAGES in the Makefile); run it longer with
// `go test -run '^$' -fuzz '^FuzzWriteRequest$' -fuzztime 5m ./router/hop`.
func FuzzWriteRequest(f *testing.F) {
	f.Add("GET", "cell-a:8081", "/api/v1/workspaces/ws_x", "", "X-Request-ID", "req_1", "User-Agent", "", false)
	f.Add("HEAD", "127.0.0.1:1", "/", "a=1&b=2", "Accept", "*/*", "Idempotency-Key", "k", true)
	f.Add("DELETE", "cell", "/x y", "q", "x-lower", " padded\t", "Accept-Encoding", "gzip", false)
	f.Add("", "h", "//double", "", "Transfer-Encoding", "chunked", "Content-Length", "5", false)
	f.Add("GET", "h", "/", "", "X-Bad", "a\r\nX-Injected: 1", "Host", "evil", false)
	f.Add("G ET", "a b", "/\r\n", "", "Bad Name", "v", "X-Nul", "a\x00b", false)
	f.Add("GET", "h", "/", "", "host", "evil", "content-length", "5", false)
	f.Add("OPTIONS", "[::1]:80", "/%2F?", "", "Connection", "keep-alive", "Trailer", "X", true)
	f.Fuzz(func(t *testing.T, method, host, path, query, k1, v1, k2, v2 string, closeConn bool) {
		if !strings.HasPrefix(path, "/") {
			// The ReverseProxy only ever forwards origin-form targets.
			path = "/" + path
		}
		req := &http.Request{
			Method: method,
			URL:    &url.URL{Scheme: "http", Host: host, Path: path, RawQuery: query},
			Host:   host,
			Header: http.Header{},
			Close:  closeConn,
		}
		req.Header[k1] = append(req.Header[k1], v1)
		req.Header[k2] = append(req.Header[k2], v2)

		var out bytes.Buffer
		w := bufio.NewWriter(&out)
		if err := writeRequest(w, req); err != nil {
			if out.Len() != 0 || w.Buffered() != 0 {
				t.Fatalf("refused (%v) but wrote %q", err, out.String()+"…")
			}
			return
		}
		br := bufio.NewReader(bytes.NewReader(out.Bytes()))
		got, err := http.ReadRequest(br)
		if err != nil {
			t.Fatalf("wrote a request net/http cannot read (%v):\n%q", err, out.String())
		}
		if rest, _ := io.ReadAll(br); len(rest) != 0 {
			t.Fatalf("bytes after the request (a second request?): %q in\n%q", rest, out.String())
		}
		wantMethod := method
		if wantMethod == "" {
			wantMethod = http.MethodGet
		}
		if got.Method != wantMethod || got.RequestURI != req.URL.RequestURI() || got.Host != host {
			t.Fatalf("read %s %s Host %q, want %s %s Host %q", got.Method, got.RequestURI, got.Host,
				wantMethod, req.URL.RequestURI(), host)
		}
		if got.Close != closeConn {
			t.Fatalf("Close %v, want %v", got.Close, closeConn)
		}
		if got.ContentLength != 0 || len(got.TransferEncoding) != 0 {
			t.Fatalf("body announced: Content-Length %d, Transfer-Encoding %v", got.ContentLength, got.TransferEncoding)
		}
		// Headers: what was asked for, canonicalised and trimmed as a reader sees them, minus
		// the ones the writer owns (Host, framing, Connection) and an empty User-Agent.
		want := http.Header{}
		for k, vs := range req.Header {
			ck := http.CanonicalHeaderKey(k)
			switch ck {
			case "Host", "Content-Length", "Transfer-Encoding", "Trailer", "Connection":
				continue
			}
			for _, v := range vs {
				if ck == "User-Agent" && v == "" && k == "User-Agent" {
					continue
				}
				want[ck] = append(want[ck], strings.Trim(v, " \t"))
			}
		}
		delete(got.Header, "Content-Length")
		delete(got.Header, "Connection")
		if len(got.Header) != len(want) {
			t.Fatalf("headers %q, want %q", got.Header, want)
		}
		for k, vs := range want {
			g := slices.Clone(got.Header[k])
			slices.Sort(g)
			slices.Sort(vs)
			if !slices.Equal(g, vs) {
				t.Fatalf("header %s = %q, want %q", k, got.Header[k], vs)
			}
		}
	})
}

// FuzzRoundTripAnswer sends a request to a cell that answers with arbitrary bytes and then
// closes the connection: the transport must neither panic nor hang, must hand back a final
// (non-1xx) answer or an error, and once the body is read or closed must hold no connection
// other than idle ones (every connection it opened is pooled or closed, none leaked).
func FuzzRoundTripAnswer(f *testing.F) {
	f.Add([]byte(okResponse))
	f.Add([]byte("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nok"))
	f.Add([]byte("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\nHTTP/1.1 200 OK\r\n"))
	f.Add([]byte("HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n"))
	f.Add([]byte("HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\n"))
	f.Add([]byte("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil the end"))
	f.Add([]byte("HTTP/1.0 304 Not Modified\r\nContent-Length: 10\r\n\r\n"))
	f.Add([]byte("garbage\r\n\r\n"))
	f.Add([]byte{})

	var payload atomic.Pointer[[]byte]
	addr, _ := rawServer(f, func(_ int, c net.Conn) {
		if _, err := readRequest(bufio.NewReader(c)); err != nil {
			return
		}
		_, _ = c.Write(*payload.Load())
		// The deferred Close ends the answer: no answer waits on a timeout.
	})
	tr, _ := newTransport(f, addr, func(c *Config) { c.ResponseHeaderTimeout = 5 * time.Second })
	f.Fuzz(func(t *testing.T, answer []byte) {
		payload.Store(&answer)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/", nil)
		if err != nil {
			t.Fatal(err)
		}
		res, err := tr.RoundTrip(req)
		if err == nil {
			if res.StatusCode < 200 {
				t.Fatalf("a %d informational answer was returned as final", res.StatusCode)
			}
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
		}
		if ctx.Err() != nil {
			t.Fatalf("round trip took the whole 10 s deadline (hang) for %q", answer)
		}
		tr.mu.Lock()
		open, idle := len(tr.conns), len(tr.idle)
		tr.mu.Unlock()
		if open != idle {
			t.Fatalf("%d connections open but only %d idle after the answer was consumed: one leaked", open, idle)
		}
	})
}

// FuzzReadHead holds readHead to http.ReadResponse on arbitrary input: the same error, or the
// same status, protocol, headers, length and connection rule, and, when readHead parsed the
// head itself, the same body bytes (or a short body's error) and the same bytes left after
// them.
//
// `make test` runs it briefly (see FUZZ_PACKAGES in the Makefile); run it longer with
// `go test -run '^$' -fuzz '^FuzzReadHead$' -fuzztime 5m ./router/hop`.
func FuzzReadHead(f *testing.F) {
	f.Add([]byte("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\nDate: x\r\n\r\n{}next"), false)
	f.Add([]byte("HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nX-A: 1\r\nX-A: 2\r\n\r\n"), false)
	f.Add([]byte("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort"), false)
	f.Add([]byte("HTTP/1.1 200 OK\r\ncontent-length: 1\r\nX-Folded: a\r\n b\r\n\r\nx"), false)
	f.Add([]byte("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\n\r\n"), false)
	f.Add([]byte("HTTP/1.1 204 No Content\r\nContent-Length: 3\r\n\r\n"), false)
	f.Add([]byte("HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"), false)
	f.Add([]byte("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 1\r\n\r\nx"), false)
	f.Add([]byte("HTTP/1.1 200 OK\r\nContent-Length: 01\r\nContent-Length: 1\r\n\r\nx"), true)
	f.Add([]byte("HTTP/1.0 200 OK\r\nPragma: no-cache\r\nContent-Length:  1 \r\n\r\nx"), false)
	f.Add([]byte("HTTP/1.1 999\r\nX: \t v\x80\t \r\nContent-Length: 1\r\n\r\nx"), false)
	f.Fuzz(func(t *testing.T, data []byte, head bool) {
		req := &http.Request{Method: http.MethodGet}
		if head {
			req.Method = http.MethodHead
		}
		br := bufio.NewReaderSize(bytes.NewReader(data), 4096)
		got, fast, err := readHead(br, req)
		wantBR := bufio.NewReaderSize(bytes.NewReader(data), 4096)
		want, wantErr := http.ReadResponse(wantBR, req)
		if (err == nil) != (wantErr == nil) || (err != nil && err.Error() != wantErr.Error()) {
			t.Fatalf("readHead: %v; http.ReadResponse: %v", err, wantErr)
		}
		if err != nil || !fast {
			return // net/http's own answer
		}
		if got.Status != want.Status || got.StatusCode != want.StatusCode || got.Proto != want.Proto ||
			got.ProtoMajor != want.ProtoMajor || got.ProtoMinor != want.ProtoMinor ||
			got.ContentLength != want.ContentLength || got.Close != want.Close ||
			len(want.TransferEncoding) != 0 || len(want.Trailer) != 0 || got.Request != req {
			t.Fatalf("readHead: %+v\nhttp.ReadResponse: %+v", got, want)
		}
		if !reflect.DeepEqual(got.Header, want.Header) {
			t.Fatalf("headers: readHead %q, http.ReadResponse %q", got.Header, want.Header)
		}
		if (want.Body == http.NoBody) != (got.ContentLength == 0) {
			t.Fatalf("length %d; net/http's body %T", got.ContentLength, want.Body)
		}
		b := &body{c: &conn{br: br}, remain: got.ContentLength}
		gotBody, gotErr := io.ReadAll(readerFunc(b.readBuffered))
		wantBody, wantErr := io.ReadAll(want.Body)
		if !bytes.Equal(gotBody, wantBody) || (gotErr == nil) != (wantErr == nil) {
			t.Fatalf("body: readHead's %q (%v), net/http's %q (%v)", gotBody, gotErr, wantBody, wantErr)
		}
		gotRest, _ := io.ReadAll(br)
		wantRest, _ := io.ReadAll(wantBR)
		if !bytes.Equal(gotRest, wantRest) {
			t.Fatalf("left after the body: readHead %q, net/http %q", gotRest, wantRest)
		}
	})
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }
