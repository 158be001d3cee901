package h1

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/textproto"
	"reflect"
	"testing"

	"golang.org/x/net/http/httpguts"
)

// parseSeeds are heads for FuzzParseRequest: plain ones the loop takes and near misses it
// must leave to net/http.
var parseSeeds = []string{
	"GET / HTTP/1.1\r\nHost: example.com\r\n\r\n",
	"GET /a/b?c=d&e=%20f HTTP/1.1\r\nHost: example.com:8080\r\nAccept: */*\r\nUser-Agent: x\r\n\r\n",
	"POST /upload HTTP/1.1\r\nHost: h\r\nContent-Length: 12\r\nContent-Type: text/plain\r\n\r\nhello world!",
	"GET /%2F/x HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n",
	"GET /? HTTP/1.1\r\nHost: h\r\nPragma: no-cache\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: h\r\nX-A: 1\r\nx-a: 2\r\nX-A:\t 3 \t\r\n\r\n",
	"GET / HTTP/1.1\r\nHost:\r\n\r\n",
	"GET / HTTP/1.1\r\nhost: [::1]:80\r\ncontent-length: 007\r\n\r\n",
	"OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n",
	"CONNECT h:443 HTTP/1.1\r\nHost: h:443\r\n\r\n",
	"GET http://h/ HTTP/1.1\r\nHost: h\r\n\r\n",
	"GET //h/x HTTP/1.1\r\nHost: h\r\n\r\n",
	"GET /#f HTTP/1.1\r\nHost: h\r\n\r\n",
	"GET /%zz HTTP/1.1\r\nHost: h\r\n\r\n",
	"GET / HTTP/1.0\r\nHost: h\r\n\r\n",
	"GET / HTTP/1.1\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a b\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: h\r\nBad Name: x\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: h\r\nX : y\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: h\r\nX: a\r\n b\r\n\r\n",
	"GET / HTTP/1.1\r\n Host: h\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: h\nX: y\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: h\r\nX: a\x00b\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: h\r\nX: caf\xc3\xa9\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: h\r\nContent-Length: -1\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: h\r\nContent-Length: 9223372036854775807\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: h\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
	"PUT / HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n",
	"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
	"G@T / HTTP/1.1\r\nHost: h\r\n\r\n",
	"GET  / HTTP/1.1\r\nHost: h\r\n\r\n",
	"GET /a b HTTP/1.1\r\nHost: h\r\n\r\n",
	"\r\nGET / HTTP/1.1\r\nHost: h\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: h\r\nCookie: a=b; c=d\r\nX-Forwarded-For: 1.2.3.4\r\n\r\n",
}

// FuzzParseRequest holds parseRequest to net/http: a head the loop accepts must be one that
// http.ReadRequest and the checks of net/http's server accept, read into the same request.
func FuzzParseRequest(f *testing.F) {
	for _, s := range parseSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		// What peekHead hands over: the bytes up to the first empty line.
		i := bytes.Index(in, crlfcrlf)
		if i < 0 {
			return
		}
		head := in[:i+len(crlfcrlf)]
		got := parseRequest((&http.Request{}).WithContext(context.Background()), head)
		if got == nil {
			return
		}
		want, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(head)))
		if err != nil {
			t.Fatalf("parseRequest took %q, http.ReadRequest refuses it: %v", head, err)
		}
		if err := serverChecks(head); err != nil {
			t.Fatalf("parseRequest took %q, net/http's server refuses it: %v", head, err)
		}
		if got.Method != want.Method || got.RequestURI != want.RequestURI || got.Host != want.Host ||
			got.ContentLength != want.ContentLength || got.Close != want.Close ||
			got.ProtoMajor != want.ProtoMajor || got.ProtoMinor != want.ProtoMinor {
			t.Fatalf("%q:\nloop     %s %q %q host %q length %d close %v %s\nnet/http %s %q %q host %q length %d close %v %s", head,
				got.Method, got.RequestURI, got.URL, got.Host, got.ContentLength, got.Close, got.Proto,
				want.Method, want.RequestURI, want.URL, want.Host, want.ContentLength, want.Close, want.Proto)
		}
		if got.URL.String() != want.URL.String() || !reflect.DeepEqual(*got.URL, *want.URL) {
			t.Fatalf("%q: URL %#v, net/http %#v", head, *got.URL, *want.URL)
		}
		if !reflect.DeepEqual(got.Header, want.Header) {
			t.Fatalf("%q: header %q, net/http %q", head, got.Header, want.Header)
		}
	})
}

// serverChecks are the checks net/http's server makes in (*conn).readRequest on the header
// http.ReadRequest read (with its Host lines, which ReadRequest then deletes).
func serverChecks(head []byte) error {
	tp := textproto.NewReader(bufio.NewReader(bytes.NewReader(head)))
	if _, err := tp.ReadLine(); err != nil {
		return err
	}
	h, err := tp.ReadMIMEHeader()
	if err != nil {
		return err
	}
	hosts := h["Host"]
	switch {
	case len(hosts) != 1:
		return fmt.Errorf("%d Host headers", len(hosts))
	case !httpguts.ValidHostHeader(hosts[0]):
		return fmt.Errorf("bad Host %q", hosts[0])
	}
	for k, vs := range h {
		if !httpguts.ValidHeaderFieldName(k) {
			return fmt.Errorf("bad header name %q", k)
		}
		for _, v := range vs {
			if !httpguts.ValidHeaderFieldValue(v) {
				return fmt.Errorf("bad header value %q", v)
			}
		}
	}
	return nil
}

// FuzzPeekHead: bytes that hold a whole request head for net/http hold one for the loop too,
// or are handed over at once; the loop never waits for more than net/http needs.
func FuzzPeekHead(f *testing.F) {
	for _, s := range parseSeeds {
		f.Add([]byte(s))
	}
	f.Add([]byte("GET / HTTP/1.1\nHost: h\n\n"))
	f.Add([]byte("GET / HTTP/1.1\r\nHost: h\n\r\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		if _, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(in))); err != nil {
			return
		}
		// At the end of in the reader says EOF: a loop that wants more bytes fails.
		head, err := peekHead(bufio.NewReaderSize(bytes.NewReader(in), bufSize))
		if err != nil {
			t.Fatalf("net/http reads a request from %q, the loop waits for more: %v", in, err)
		}
		if head != nil && !bytes.HasPrefix(in, head) {
			t.Fatalf("head %q is not a prefix of %q", head, in)
		}
	})
}
