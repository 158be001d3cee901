package h1

import (
	"errors"
	"io"
	"net/http"
	"testing"
)

// TestBodyClosedWhenHandlerReturns: a request body read after the handler returned (what an
// http.RoundTripper may do: net/http's Transport writes a request body on a goroutine of its
// own, which can outlive the round trip when the upstream answers first) must fail, as with
// net/http's server, not read the connection's buffer, which is the next request's, or, once
// the connection is closed, another connection's from the pool (or nil: a panic).
func TestBodyClosedWhenHandlerReturns(t *testing.T) {
	bodies := make(chan io.ReadCloser, 1)
	_, addr, _ := startH1(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		bodies <- r.Body
		_, _ = io.WriteString(w, "early")
	}), nil)

	c := dial(t, addr)
	// More body than the loop discards after the handler: the connection closes after the answer.
	c.send("POST / HTTP/1.1\r\nHost: example.com\r\nContent-Length: 1048576\r\n\r\n0123456789")
	if _, body := c.mustRead("POST"); body != "early" {
		t.Fatalf("answer %q", body)
	}
	late := wait(t, bodies, "request body")
	c.waitClosed()

	var n int
	var err error
	func() {
		defer func() {
			if p := recover(); p != nil {
				t.Fatalf("a late read of the body panicked: %v", p)
			}
		}()
		n, err = late.Read(make([]byte, 64))
	}()
	if n != 0 || !errors.Is(err, http.ErrBodyReadAfterClose) {
		t.Fatalf("a read after the handler returned gave %d bytes, %v; want 0, %v", n, err, http.ErrBodyReadAfterClose)
	}
}
