package hop

import (
	"bufio"
	"bytes"
	"net/http"
)

// readHead reads a response's status line and headers from br. The answers that make up
// nearly all of a cell's traffic (HTTP/1.1, a final status other than 204 and 304, a single
// Content-Length, headers in canonical form on one line each, no Connection, Transfer-Encoding,
// Trailer or Pragma header, all of it in br's buffer) are parsed here into one Response, one
// Header map, one string holding every key and value and one slice of values: about a third of
// http.ReadResponse's CPU and allocations. It then returns the response with a nil Body and
// ContentLength set, the head consumed from br: the caller reads the body itself. Anything
// else is left unread and goes to http.ReadResponse (body set as net/http sets it, fast
// false), which parses it, or refuses it, as it always did. FuzzReadHead holds the two to the
// same answers.
func readHead(br *bufio.Reader, req *http.Request) (res *http.Response, fast bool, err error) {
	if req.Method != http.MethodHead {
		if head := peekHead(br); head != nil {
			if res := parseHead(head, req); res != nil {
				_, _ = br.Discard(len(head))
				return res, true, nil
			}
		}
	}
	res, err = http.ReadResponse(br, req)
	return res, false, err
}

// peekHead returns the head (status line to the empty line, included) at the start of br's
// buffer, reading more while it is incomplete and the buffer has room; nil when it does not
// fit in the buffer or reading fails (http.ReadResponse then reads it, or reports the error).
func peekHead(br *bufio.Reader) []byte {
	n := 1
	for {
		if _, err := br.Peek(n); err != nil {
			return nil
		}
		buf, _ := br.Peek(br.Buffered())
		if i := bytes.Index(buf, crlfcrlf); i >= 0 {
			return buf[:i+len(crlfcrlf)]
		}
		if len(buf) >= br.Size() {
			return nil
		}
		n = len(buf) + 1
	}
}

var crlfcrlf = []byte("\r\n\r\n")

// parseHead parses a complete head that readHead's fast path takes, or returns nil.
func parseHead(head []byte, req *http.Request) *http.Response {
	const proto = "HTTP/1.1 "
	// "HTTP/1.1 200" at least, then the reason phrase after a space, or nothing.
	if len(head) < len(proto)+3+4 || string(head[:len(proto)]) != proto {
		return nil
	}
	eol := bytes.IndexByte(head, '\n') // head ends with \r\n\r\n: there is one
	if head[eol-1] != '\r' {
		return nil
	}
	code := head[len(proto) : len(proto)+3]
	if code[0] < '2' || code[0] > '5' || !isDigit(code[1]) || !isDigit(code[2]) {
		return nil
	}
	statusCode := int(code[0]-'0')*100 + int(code[1]-'0')*10 + int(code[2]-'0')
	if statusCode == http.StatusNoContent || statusCode == http.StatusNotModified {
		return nil // no body whatever Content-Length says: net/http's rules
	}
	if rest := head[len(proto)+3 : eol-1]; len(rest) > 0 && (rest[0] != ' ' || !printable(rest)) {
		return nil
	}

	// Count the header lines first, to size the map and the values slice.
	lines := bytes.Count(head[eol+1:], crlf) - 1 // the last is the empty line
	// One string for the status and every key and value: substrings of it allocate nothing.
	s := string(head)
	h := make(http.Header, lines)
	values := make([]string, lines)
	contentLength := int64(-1)
	pos := eol + 1
	for i := range lines {
		end := pos + bytes.Index(head[pos:], crlf)
		line := head[pos:end]
		colon := bytes.IndexByte(line, ':')
		if colon <= 0 || !canonicalToken(line[:colon]) {
			return nil // obs-fold (a line starting with a space), no colon, odd keys
		}
		v := trimOWS(line[colon+1:])
		if !validValue(v) {
			return nil
		}
		key := s[pos : pos+colon]
		vstart := end - len(v) - trailingOWS(line)
		value := s[vstart : vstart+len(v)]
		switch key {
		case "Connection", "Transfer-Encoding", "Trailer", "Pragma":
			return nil // framing, connection and cache rules net/http applies
		case "Content-Length":
			if contentLength >= 0 {
				return nil
			}
			if contentLength = parseLength(v); contentLength < 0 {
				return nil
			}
		}
		values[i] = value
		if vs, ok := h[key]; ok {
			// A repeated key: its values get a slice of their own (rare).
			h[key] = append(vs[:len(vs):len(vs)], value)
		} else {
			h[key] = values[i : i+1 : i+1]
		}
		pos = end + len(crlf)
	}
	if contentLength < 0 {
		return nil // read to the end of the connection: net/http's framing
	}
	return &http.Response{
		Status:        s[len(proto) : eol-1],
		StatusCode:    statusCode,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        h,
		ContentLength: contentLength,
		Request:       req,
	}
}

var crlf = []byte("\r\n")

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// printable reports whether b is visible ASCII, spaces and tabs only.
func printable(b []byte) bool {
	for _, c := range b {
		if (c < ' ' && c != '\t') || c >= 0x7f {
			return false
		}
	}
	return true
}

// canonicalToken reports whether k is a header name made of letters, digits and hyphens in
// net/http's canonical form (Content-Type): the keys net/http would store unchanged.
func canonicalToken(k []byte) bool {
	upper := true
	for _, c := range k {
		switch {
		case c == '-':
			upper = true
			continue
		case 'A' <= c && c <= 'Z':
			if !upper {
				return false
			}
		case 'a' <= c && c <= 'z':
			if upper {
				return false
			}
		case isDigit(c):
		default:
			return false
		}
		upper = false
	}
	return true
}

// validValue reports whether v holds only bytes net/http accepts in a header value, minus
// the control characters it would refuse (the fallback then reports them).
func validValue(v []byte) bool {
	for _, c := range v {
		if (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

// trimOWS removes the spaces and tabs around a header value, as net/http does.
func trimOWS(v []byte) []byte {
	for len(v) > 0 && (v[0] == ' ' || v[0] == '\t') {
		v = v[1:]
	}
	return v[:len(v)-trailingOWS(v)]
}

// trailingOWS is the count of spaces and tabs at the end of b.
func trailingOWS(b []byte) int {
	n := 0
	for n < len(b) && (b[len(b)-1-n] == ' ' || b[len(b)-1-n] == '\t') {
		n++
	}
	return n
}

// parseLength parses a Content-Length value of 1 to 18 digits without a leading zero (or "0");
// -1 for anything else, which the fallback parses (or refuses) by net/http's rules.
func parseLength(v []byte) int64 {
	if len(v) == 0 || len(v) > 18 || (v[0] == '0' && len(v) > 1) {
		return -1
	}
	var n int64
	for _, c := range v {
		if !isDigit(c) {
			return -1
		}
		n = n*10 + int64(c-'0')
	}
	return n
}
