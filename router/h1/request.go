package h1

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"net/textproto"
	"strings"
	"sync"

	"golang.org/x/net/http/httpguts"
)

// Outcomes of readRequest.
const (
	readPlain  = iota // a plain request, for the loop
	readOther         // anything else: hand the connection to net/http, nothing consumed
	readFailed        // the connection broke (or was closed) mid-head: close it
)

// readRequest reads the next request head. For a plain request it consumes the head and
// returns the request; otherwise nothing is consumed.
func (c *conn) readRequest() (*http.Request, int) {
	head, err := peekHead(c.br)
	switch {
	case err != nil && c.br.Buffered() == 0:
		return nil, readFailed
	case err == io.EOF:
		// A head cut short by the client's end of input: net/http answers it (400) from the
		// same bytes.
		return nil, readOther
	case err != nil:
		// A head cut short by a reset or a timeout: nothing to answer (net/http answers
		// nothing either).
		return nil, readFailed
	case head == nil:
		return nil, readOther // longer than the buffer, or bare LFs
	}
	req := parseRequest(c.ctx, head)
	if req == nil {
		return nil, readOther
	}
	_, _ = c.br.Discard(len(head))
	req.RemoteAddr = c.remote
	if req.ContentLength > 0 {
		req.Body = &body{c: c, left: req.ContentLength}
	} else {
		req.Body = http.NoBody
	}
	return req, readPlain
}

// peekHead returns the head (request line to the empty line, included) at the start of br's
// buffer, reading more while it is incomplete; nil, nil when it is net/http's to read: it does
// not fit in the buffer, or it ends in an empty line with a bare LF, which net/http accepts.
func peekHead(br *bufio.Reader) ([]byte, error) {
	n := 1
	for {
		if _, err := br.Peek(n); err != nil {
			return nil, err
		}
		buf, _ := br.Peek(br.Buffered())
		if i := bytes.Index(buf, crlfcrlf); i >= 0 {
			return buf[:i+len(crlfcrlf)], nil
		}
		// Without this a head whose lines end in bare LFs would wait for a CRLFCRLF that is not
		// coming, until the client gives up or ReadHeaderTimeout cuts it; net/http answers it.
		if bytes.Contains(buf, lflf) || bytes.Contains(buf, lfcrlf) {
			return nil, nil
		}
		if len(buf) >= br.Size() {
			return nil, nil
		}
		n = len(buf) + 1
	}
}

var (
	crlfcrlf = []byte("\r\n\r\n")
	lflf     = []byte("\n\n")
	lfcrlf   = []byte("\n\r\n")
)

// parseRequest parses a complete head into a request for the loop, or returns nil when the
// request is not plain (package comment) or net/http would refuse it: net/http then reads it
// and answers as it always did. FuzzParseRequest holds the two to the same requests.
func parseRequest(ctx context.Context, head []byte) *http.Request {
	// One string for the whole head: method, target, keys and values are substrings of it.
	s := string(head)
	eol := strings.IndexByte(s, '\n')
	if eol < 1 || s[eol-1] != '\r' {
		return nil
	}
	line := s[:eol-1]
	const proto = " HTTP/1.1"
	if !strings.HasSuffix(line, proto) {
		return nil
	}
	method, target, ok := strings.Cut(line[:len(line)-len(proto)], " ")
	if !ok || !isToken(method) || method == http.MethodConnect || method == "PRI" {
		return nil
	}
	// Origin form only ("/path?query"): no authority ("//host"), no fragment, nothing that is
	// not visible ASCII. Then url.Parse reads it as url.ParseRequestURI does.
	if len(target) == 0 || target[0] != '/' || strings.HasPrefix(target, "//") || !visible(target) ||
		strings.IndexByte(target, '#') >= 0 {
		return nil
	}

	// Header lines: count them first to size the map and the values.
	body := s[eol+1 : len(s)-2] // the lines, each ending in \r\n; the empty line cut off
	n := strings.Count(body, "\n")
	h := make(http.Header, n)
	vals := make([]string, n)
	var host string
	hosts, lengths := 0, 0
	var contentLength int64
	for i := 0; len(body) > 0; i++ {
		e := strings.IndexByte(body, '\n')
		if e < 1 || body[e-1] != '\r' {
			return nil
		}
		line, rest := body[:e-1], body[e+1:]
		body = rest
		k, v, ok := strings.Cut(line, ":")
		if !ok || !isToken(k) { // also an obsolete line folding (leading space) and "Key :"
			return nil
		}
		v = trimOWS(v)
		if !validValue(v) {
			return nil
		}
		k = textproto.CanonicalMIMEHeaderKey(k)
		switch k {
		case "Host":
			hosts++
			host = v
			continue
		case "Content-Length":
			lengths++
			cl, ok := parseLength(v)
			if !ok {
				return nil
			}
			contentLength = cl
		case "Transfer-Encoding", "Upgrade", "Expect", "Trailer", "Http2-Settings":
			return nil
		case "Connection":
			if containsFold(v, "upgrade") {
				return nil
			}
		}
		if prev, ok := h[k]; ok {
			h[k] = append(prev, v)
		} else {
			vals[i] = v
			h[k] = vals[i : i+1 : i+1]
		}
	}
	if hosts != 1 || !httpguts.ValidHostHeader(host) || lengths > 1 {
		return nil
	}
	if pragma, ok := h["Pragma"]; ok && len(pragma) > 0 && pragma[0] == "no-cache" {
		if _, ok := h["Cache-Control"]; !ok {
			h["Cache-Control"] = []string{"no-cache"} // what net/http does for HTTP/1.0 caches
		}
	}
	req, err := http.NewRequestWithContext(ctx, method, target, nil)
	if err != nil {
		return nil
	}
	req.Header = h
	req.Host = host
	req.RequestURI = target
	req.ContentLength = contentLength
	req.Close = httpguts.HeaderValuesContainsToken(h["Connection"], "close")
	return req
}

// isToken reports whether s is a non-empty RFC 9110 token (a method or a header name).
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !httpguts.IsTokenRune(rune(s[i])) {
			return false
		}
	}
	return true
}

// visible reports whether s is visible ASCII only (no space, no control, nothing above 0x7e).
func visible(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] >= 0x7f {
			return false
		}
	}
	return true
}

// validValue is httpguts.ValidHeaderFieldValue: no control bytes but the tab.
func validValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if b := v[i]; (b < ' ' && b != '\t') || b == 0x7f {
			return false
		}
	}
	return true
}

// trimOWS trims spaces and tabs around a header value, as textproto does.
func trimOWS(s string) string {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}

// parseLength parses a Content-Length: 1 to 18 digits.
func parseLength(v string) (int64, bool) {
	if len(v) == 0 || len(v) > 18 {
		return 0, false
	}
	var n int64
	for i := 0; i < len(v); i++ {
		if v[i] < '0' || v[i] > '9' {
			return 0, false
		}
		n = n*10 + int64(v[i]-'0')
	}
	return n, true
}

func containsFold(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if strings.EqualFold(s[i:i+len(sub)], sub) {
			return true
		}
	}
	return false
}

// body is a request body framed by Content-Length, read from the connection's buffer.
type body struct {
	mu     sync.Mutex
	c      *conn
	left   int64
	closed bool
	err    error // a read error: sticky
}

func (b *body) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.closed:
		return 0, http.ErrBodyReadAfterClose
	case b.err != nil:
		return 0, b.err
	case b.left == 0:
		return 0, io.EOF
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.c.br.Read(p)
	b.left -= int64(n)
	switch {
	case b.left == 0:
		err = io.EOF
	case err == io.EOF:
		err = io.ErrUnexpectedEOF
	}
	// A read error is sticky and closes the connection with a Connection: close; the client's
	// end of input mid-body is not kept: net/http's body takes it for the body's end when it
	// decides on the answer's head (no Connection: close), and the connection closes anyway
	// when discard finds the rest missing.
	if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
		b.err = err
	}
	return n, err
}

func (b *body) Close() error {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	return nil
}

// discardable reports whether discard can end the body cleanly: no read error, and less than
// max left (net/http closes a connection with maxPostHandlerReadBytes or more unread).
func (b *body) discardable(max int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err == nil && b.left < max
}

// discard reads what the handler left of the body, if discardable; it reports whether the
// body ended cleanly (the connection can carry another request).
func (b *body) discard(max int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err != nil || b.left >= max {
		return false
	}
	n, err := b.c.br.Discard(int(b.left))
	b.left -= int64(n)
	return err == nil && b.left == 0
}
