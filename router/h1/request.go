package h1

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/net/http/httpguts"
)

// Outcomes of readRequest.
const (
	readPlain  = iota // a plain request, for the loop
	readOther         // anything else: hand the connection to net/http, nothing consumed
	readFailed        // the connection broke (or was closed) mid-head: close it
	readAgain         // raw mode: the head is not all there yet; wait for the socket
)

// readRequest reads the next request head. For a plain request it consumes the head and
// returns the request; otherwise nothing is consumed.
func (c *conn) readRequest() (*http.Request, int) {
	head, err := peekHead(c.br)
	switch {
	case err == errAgain:
		return nil, readAgain
	case err != nil && c.br.Buffered() == 0:
		return nil, readFailed
	case err == io.EOF && c.served && c.br.Buffered() < 4:
		// The end of input before 4 bytes of a keep-alive request: net/http's server closes
		// without an answer (it waits for 4 bytes between requests).
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
	if c.tmpl == nil {
		c.tmpl = (&http.Request{}).WithContext(c.ctx)
	}
	req := parseRequest(c.tmpl, head)
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
//
// tmpl is an empty request carrying the context requests get: each request is a copy of it
// (the context is not settable otherwise without a second copy, http.Request.WithContext).
func parseRequest(tmpl *http.Request, head []byte) *http.Request {
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
	// A method is a token, as a field name is (httpguts checks both the same way).
	if !ok || !httpguts.ValidHeaderFieldName(method) || method == http.MethodConnect || method == "PRI" {
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
		if k, ok = canonicalKey(k, ok); !ok { // also an obsolete line folding and "Key :"
			return nil
		}
		// Spaces and tabs only: a CR left in the value is net/http's to refuse.
		v = strings.Trim(v, " \t")
		if !httpguts.ValidHeaderFieldValue(v) {
			return nil
		}
		switch k {
		case "Host":
			hosts++
			host = v
			continue
		case "Content-Length":
			lengths++
			// Digits only (no sign, no spaces), as net/http's parseContentLength.
			cl, err := strconv.ParseUint(v, 10, 63)
			if err != nil {
				return nil
			}
			contentLength = int64(cl)
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
	u := requestURL(target)
	if u == nil {
		return nil
	}
	req := new(http.Request)
	*req = *tmpl
	req.Method = method
	req.URL = u
	req.Proto, req.ProtoMajor, req.ProtoMinor = "HTTP/1.1", 1, 1
	req.Header = h
	req.Host = host
	req.RequestURI = target
	req.ContentLength = contentLength
	req.Close = httpguts.HeaderValuesContainsToken(h["Connection"], "close")
	return req
}

// requestURL parses an origin-form target as url.ParseRequestURI does. A path of the
// characters a URL path never escapes, with an optional query, is split by hand (what
// ParseRequestURI would give: Path, RawQuery, nothing else); anything else goes to
// ParseRequestURI. nil when it refuses the target.
func requestURL(target string) *url.URL {
	path, query, hasQuery := strings.Cut(target, "?")
	plain := !(hasQuery && query == "") // a lone "?" is ForceQuery
	for i := 0; plain && i < len(path); i++ {
		plain = plainPath[path[i]]
	}
	if plain {
		return &url.URL{Path: path, RawQuery: query}
	}
	u, err := url.ParseRequestURI(target)
	if err != nil {
		return nil
	}
	return u
}

// plainPath marks the bytes url.URL.EscapedPath never escapes: with only these, Path is the
// target's path as sent and RawPath is empty.
var plainPath = func() (t [256]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c], t[c-'a'+'A'] = true, true
	}
	for _, c := range "-_.~$&+,/:;=@" {
		t[c] = true
	}
	return t
}()

// canonicalKey checks a header name and returns its canonical form (textproto's) in one pass
// over it; a name already canonical, or one the API uses in a form of its own, costs no
// allocation.
func canonicalKey(k string, ok bool) (string, bool) {
	if !ok || k == "" {
		return "", false
	}
	canonical, upper := true, true
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !httpguts.IsTokenRune(rune(c)) {
			return "", false
		}
		if upper && 'a' <= c && c <= 'z' || !upper && 'A' <= c && c <= 'Z' {
			canonical = false
		}
		upper = c == '-'
	}
	if canonical {
		return k, true
	}
	if v, ok := internedKeys[k]; ok {
		return v, true
	}
	return textproto.CanonicalMIMEHeaderKey(k), true
}

// internedKeys are header names clients send in a form that is not canonical, spelled as the
// spec spells them.
var internedKeys = map[string]string{
	"X-Workspace-ID": "X-Workspace-Id",
	"X-Request-ID":   "X-Request-Id",
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

// containsFold reports whether sub occurs in s, ASCII case ignored.
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
// max left (net/http closes a connection with maxPostHandlerReadBytes or more unread). A read
// in progress is not waited for (true; discard decides after the handler): a goroutine of the
// handler's may wait in it for the client, which may send the rest of the body only once it
// has the answer's head (full duplex, package comment).
func (b *body) discardable(max int64) bool {
	if !b.mu.TryLock() {
		return true
	}
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
