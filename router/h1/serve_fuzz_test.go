package h1

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// FuzzServeAsNetHTTP sends the same bytes, then a half-close, to an h1.Server and to a net/http
// server with the same handler: the answers, read until the connection ends, must be alike.
// It covers what the loop takes and what it hands over, pipelined in any mix.
func FuzzServeAsNetHTTP(f *testing.F) {
	for _, s := range parseSeeds {
		f.Add([]byte(s))
	}
	f.Add([]byte(get + "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n" + get))
	f.Add([]byte("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhel"))
	f.Add([]byte("HEAD / HTTP/1.1\r\nHost: a\r\n\r\nGET / HTTP/1.0\r\n\r\n"))
	f.Add([]byte("GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n" + get))

	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		keys := make([]string, 0, len(r.Header))
		for k := range r.Header {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		fmt.Fprintf(w, "%s %s %s host=%q length=%d te=%q close=%v\n",
			r.Method, r.RequestURI, r.Proto, r.Host, r.ContentLength, r.TransferEncoding, r.Close)
		for _, k := range keys {
			fmt.Fprintf(w, "%s: %q\n", k, r.Header[k])
		}
		fmt.Fprintf(w, "body %q err %v\n", b, err)
	})
	_, loopAddr, _ := startH1(f, h, nil)
	stdAddr := startStd(f, h, nil)

	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) > 16<<10 {
			return
		}
		want := exchange(t, stdAddr, in)
		got := exchange(t, loopAddr, in)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%q:\nh1 answered\n%s\nnet/http answered\n%s", in, showAnswers(got), showAnswers(want))
		}
	})
}

// exchange writes in on a new connection, half-closes it and reads answers until the server
// closes it.
func exchange(t *testing.T, addr string, in []byte) []answer {
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(hung))
	go func() {
		_, _ = nc.Write(in)
		_ = nc.(*net.TCPConn).CloseWrite()
	}()
	br := bufio.NewReader(nc)
	var out []answer
	for {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			if k := errKind(err); k == "timeout" {
				t.Fatalf("%q: no answer, no close within %v", in, hung)
			}
			return out
		}
		b, err := io.ReadAll(resp.Body)
		out = append(out, answerOf(resp, b, err))
		if err != nil {
			return out
		}
	}
}

func showAnswers(as []answer) string {
	var b strings.Builder
	for i, a := range as {
		fmt.Fprintf(&b, "  [%d] %d %q length %d te %q close %v\n      body %q %s\n",
			i, a.Status, a.Header, a.ContentLength, a.TransferEncoding, a.Close, trunc(a.Body), a.BodyErr)
	}
	return b.String()
}
