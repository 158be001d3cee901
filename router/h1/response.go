package h1

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/textproto"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/http/httpguts"
)

// stageMax is how much of an answer without a Content-Length is held back to give it one when
// the handler ends within it (net/http's bufferBeforeChunkingSize); beyond it, or at a Flush,
// the answer is chunked.
const stageMax = 2048

// sniffLen is how much of a body http.DetectContentType reads.
const sniffLen = 512

// postHandlerDiscard is how much of a request body the handler left unread is read off the
// connection to keep it (net/http's maxPostHandlerReadBytes); beyond it the connection closes.
const postHandlerDiscard = 256 << 10

// response is the http.ResponseWriter of the loop, one per request.
type response struct {
	c       *conn
	req     *http.Request
	h       http.Header
	status  int  // 0 until WriteHeader
	head    bool // the head is in the write buffer
	noBody  bool // a status without a body: writes fail
	isHead  bool // a HEAD request: the body is staged and sniffed as for GET, never sent
	chunked bool
	staging bool  // no length declared: the body goes to stage first
	close   bool  // the connection closes after this answer
	length  int64 // the declared or computed Content-Length; -1 when unknown
	written int64
	stage   []byte // held back while staging
	err     error  // a write to the client failed

	notify *closeNotify // once CloseNotify was called
}

// closeNotify is CloseNotify's channel and the end of its watch on the connection's context
// (one pointer in response, which is allocated per request).
type closeNotify struct {
	ch   chan bool
	stop func() bool
}

// newResponse is the answer to req on c, with a header map of its own and c's staging buffer.
func newResponse(c *conn, req *http.Request) *response {
	return &response{c: c, req: req, h: make(http.Header, 8), stage: c.stage[:0], length: -1,
		isHead: req.Method == http.MethodHead, close: req.Close}
}

func (w *response) Header() http.Header { return w.h }

// WriteHeader is net/http's: a code outside 100–999 panics, a 1xx answer but 101 goes out at
// once with the headers set so far, a second final status is ignored.
func (w *response) WriteHeader(code int) {
	if code < 100 || code > 999 {
		panic(fmt.Sprintf("invalid WriteHeader code %v", code))
	}
	if w.status != 0 || w.req == nil {
		return
	}
	// 101 is a final status here, as in net/http: a handler that does not hijack (the loop
	// offers no Hijack) answers 101 with no body, and the connection goes on.
	if code < 200 && code != http.StatusSwitchingProtocols {
		w.writeStatus(code)
		w.writeFields(nil)
		_, _ = w.c.bw.WriteString("\r\n")
		w.flush()
		return
	}
	w.status = code
	w.noBody = code == http.StatusSwitchingProtocols || code == http.StatusNoContent || code == http.StatusNotModified
	if w.noBody {
		delete(w.h, "Content-Length")
		delete(w.h, "Transfer-Encoding")
		// net/http's suppressedHeaders: a 304 loses its Content-Type, a 204 keeps it.
		if code == http.StatusNotModified {
			delete(w.h, "Content-Type")
		}
	}
	if v := w.h["Content-Length"]; len(v) == 1 {
		if n, err := strconv.ParseInt(v[0], 10, 64); err == nil && n >= 0 {
			w.length = n
		}
	}
	if w.length < 0 && !w.noBody {
		w.staging = true
	}
}

func (w *response) Write(p []byte) (int, error) {
	if w.req == nil {
		return 0, http.ErrHijacked // after the handler returned
	}
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if len(p) == 0 {
		// As net/http: nothing happens, whatever the status; in particular the head is not
		// written yet (without the body's first bytes it would go out without a sniffed
		// Content-Type).
		return 0, nil
	}
	if w.err != nil {
		return 0, w.err
	}
	if w.noBody {
		return 0, http.ErrBodyNotAllowed
	}
	if w.staging {
		if len(w.stage)+len(p) <= stageMax {
			w.stage = append(w.stage, p...)
			return len(p), nil
		}
		w.unstage(true, p)
	}
	if w.length >= 0 && w.written+int64(len(p)) > w.length {
		// Counted all the same, as net/http does: the answer can no longer match its length,
		// so every later write fails too and the connection closes after it (finish).
		w.written += int64(len(p))
		return 0, http.ErrContentLength
	}
	if !w.head {
		w.writeHead(p)
	}
	w.written += int64(len(p))
	if w.isHead {
		return len(p), nil
	}
	if w.chunked {
		w.writeChunk(p)
	} else {
		_, _ = w.c.bw.Write(p)
	}
	// bufio.Writer keeps its first error: a client that is gone shows here.
	if _, err := w.c.bw.Write(nil); err != nil {
		w.err = err
		return 0, err
	}
	return len(p), nil
}

// unstage ends staging: with chunked, the answer is chunked from here on; without, the staged
// bytes are the whole body. next is the write that overflows the stage, if any: net/http sniffs
// the Content-Type from the first bytes it sends, which are the stage's and then next's.
func (w *response) unstage(chunked bool, next []byte) {
	w.staging = false
	n := len(w.stage)
	switch {
	case w.isHead:
		// Never chunked; the length is known when the handler ended within the stage and
		// wrote something (net/http's rule for HEAD).
		if !chunked && n > 0 {
			w.length = int64(n)
		}
	case chunked:
		w.chunked = true
	default:
		w.length = int64(n)
	}
	first := w.stage
	if n < sniffLen && len(next) > 0 {
		first = append(first, next[:min(len(next), sniffLen-n)]...)
	}
	w.writeHead(first)
	if n > 0 {
		w.written += int64(n)
		switch {
		case w.isHead:
		case w.chunked:
			w.writeChunk(first[:n])
		default:
			_, _ = w.c.bw.Write(first[:n])
		}
	}
	w.stage = first[:0]
}

func (w *response) writeChunk(p []byte) {
	if len(p) == 0 {
		return
	}
	bw := w.c.bw
	_, _ = bw.Write(strconv.AppendInt(bw.AvailableBuffer(), int64(len(p)), 16))
	_, _ = bw.WriteString("\r\n")
	_, _ = bw.Write(p)
	_, _ = bw.WriteString("\r\n")
}

// Flush sends what is buffered; an answer of unknown length is chunked from then on.
func (w *response) Flush() { _ = w.FlushError() }

// FlushError is Flush for http.ResponseController.
func (w *response) FlushError() error {
	if w.req == nil {
		return http.ErrHijacked
	}
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if w.staging {
		w.unstage(true, nil)
	}
	if !w.head {
		w.writeHead(nil)
	}
	w.flush()
	return w.err
}

func (w *response) flush() {
	if err := w.c.bw.Flush(); err != nil && w.err == nil {
		w.err = err
	}
}

// EnableFullDuplex is for http.ResponseController. The loop's requests are full duplex
// already: what the handler left unread of a body is read off only after the answer (package
// comment), so the body stays readable while the answer goes out, and the head does not wait
// for a read of it in progress (body.discardable).
func (w *response) EnableFullDuplex() error { return nil }

// CloseNotify is http.CloseNotifier's (deprecated, but net/http's writer offers it): the
// channel receives true when the client hangs up or the connection closes while the handler
// runs, as the request's context ends; nothing after the handler returned.
func (w *response) CloseNotify() <-chan bool {
	if w.notify == nil {
		n := &closeNotify{ch: make(chan bool, 1), stop: func() bool { return false }}
		if w.req != nil {
			n.stop = context.AfterFunc(w.c.ctx, func() { n.ch <- true })
		}
		w.notify = n
	}
	return w.notify.ch
}

// SetReadDeadline is for http.ResponseController (the body-rate rule of the router).
func (w *response) SetReadDeadline(t time.Time) error { return w.c.nc.SetReadDeadline(t) }

// SetWriteDeadline is for http.ResponseController.
func (w *response) SetWriteDeadline(t time.Time) error { return w.c.nc.SetWriteDeadline(t) }

// writeStatus writes the status line.
func (w *response) writeStatus(code int) {
	bw := w.c.bw
	_, _ = bw.WriteString("HTTP/1.1 ")
	_, _ = bw.Write(strconv.AppendInt(bw.AvailableBuffer(), int64(code), 10))
	_ = bw.WriteByte(' ')
	if text := http.StatusText(code); text != "" {
		_, _ = bw.WriteString(text)
	} else {
		_, _ = bw.WriteString("status code ")
		_, _ = bw.Write(strconv.AppendInt(bw.AvailableBuffer(), int64(code), 10))
	}
	_, _ = bw.WriteString("\r\n")
}

// writeFields writes the handler's header fields but those the loop writes itself and the
// trailers, as net/http does: invalid names left out, line breaks in values made spaces.
func (w *response) writeFields(trailers []string) {
	bw := w.c.bw
	for k, vs := range w.h {
		switch k {
		case "Content-Length", "Transfer-Encoding", "Connection", "Trailer":
			continue
		}
		if slices.Contains(trailers, k) {
			continue
		}
		if strings.HasPrefix(k, http.TrailerPrefix) || !httpguts.ValidHeaderFieldName(k) {
			continue
		}
		for _, v := range vs {
			writeField(bw, k, v)
		}
	}
}

// writeField writes one header or trailer line, as net/http does: line breaks in the value
// made spaces, the value trimmed.
func writeField(bw *bufio.Writer, k, v string) {
	_, _ = bw.WriteString(k)
	_, _ = bw.WriteString(": ")
	_, _ = bw.WriteString(textproto.TrimString(oneLine(v)))
	_, _ = bw.WriteString("\r\n")
}

// writeHead writes the final answer's head into the write buffer. first is the body's first
// bytes, for the Content-Type net/http would sniff.
func (w *response) writeHead(first []byte) {
	w.head = true
	if w.c.s.closing.Load() {
		w.close = true
	}
	if v := w.h["Connection"]; len(v) > 0 && httpguts.HeaderValuesContainsToken(v, "close") {
		w.close = true
	}
	// A request body that cannot be discarded after the handler closes the connection; the
	// answer says so, as net/http's does (it decides when it writes the head, as here).
	if b, ok := w.req.Body.(*body); ok && !b.discardable(postHandlerDiscard) {
		w.close = true
	}
	if !w.noBody {
		// Not for an encoded body, whose bytes say nothing of its type (net/http, issue 31753).
		ce := w.h["Content-Encoding"]
		if _, ok := w.h["Content-Type"]; !ok && len(first) > 0 && (len(ce) == 0 || ce[0] == "") {
			w.h["Content-Type"] = []string{http.DetectContentType(first)}
		}
		// A declared trailer needs chunking.
		if len(w.h["Trailer"]) > 0 && w.length < 0 && !w.isHead {
			w.chunked = true
		}
	}
	w.writeStatus(w.status)
	// A head written when the handler has returned would otherwise carry the values of the
	// declared trailers, which the handler sets after its body (net/http sends the header as
	// it was at WriteHeader).
	var trailers []string
	if w.chunked {
		trailers = w.declaredTrailers()
	}
	w.writeFields(trailers)
	bw := w.c.bw
	switch {
	case w.chunked:
		for _, v := range w.h["Trailer"] {
			writeField(bw, "Trailer", v)
		}
		_, _ = bw.WriteString("Transfer-Encoding: chunked\r\n")
	case w.length >= 0:
		_, _ = bw.WriteString("Content-Length: ")
		_, _ = bw.Write(strconv.AppendInt(bw.AvailableBuffer(), w.length, 10))
		_, _ = bw.WriteString("\r\n")
	case !w.noBody && !w.isHead:
		w.close = true // no length and no chunking: the body ends with the connection
	}
	if _, ok := w.h["Date"]; !ok {
		_, _ = bw.WriteString("Date: ")
		_, _ = bw.Write(w.c.date())
		_, _ = bw.WriteString("\r\n")
	}
	if w.close {
		_, _ = bw.WriteString("Connection: close\r\n")
	}
	_, _ = bw.WriteString("\r\n")
}

// finish completes the answer after the handler returned and reports whether the connection
// may carry another request.
func (w *response) finish() bool {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if w.staging {
		// Declared trailers need chunking, even for a body that fits the stage (net/http).
		w.unstage(len(w.h["Trailer"]) > 0, nil)
	}
	if !w.head {
		if w.length < 0 && !w.noBody {
			w.length = 0
		}
		w.writeHead(nil)
	}
	if w.chunked {
		w.writeTrailers()
	}
	w.flush()
	keep := w.err == nil && !w.close
	if w.length >= 0 && !w.noBody && !w.isHead && w.written != w.length {
		// The answer is short of its declared length (the client must see it end), or the
		// handler tried to write past it (net/http closes then too).
		keep = false
	}
	if b, ok := w.req.Body.(*body); ok && keep {
		_ = w.c.nc.SetReadDeadline(time.Time{}) // the body-rate rule's, if it set one
		// The rest of the body must come within ReadHeaderTimeout, as the next head must:
		// nothing else bounds the discard (the deadline is gone, the sweep only watches an
		// active connection for a hang-up), so a client that declares more than it sends would
		// hold the connection and its goroutine for ever.
		w.c.setState(stateHead, w.c.s.clock.Load())
		keep = b.discard(postHandlerDiscard)
	}
	return keep
}

// writeTrailers ends a chunked body with the trailers declared in the Trailer header or set
// with http.TrailerPrefix.
func (w *response) writeTrailers() {
	bw := w.c.bw
	_, _ = bw.WriteString("0\r\n")
	write := func(k string, vs []string) {
		if !httpguts.ValidTrailerHeader(k) {
			return
		}
		for _, v := range vs {
			writeField(bw, k, v)
		}
	}
	for _, k := range w.declaredTrailers() {
		write(k, w.h[k])
	}
	for k, vs := range w.h {
		if strings.HasPrefix(k, http.TrailerPrefix) {
			write(http.CanonicalHeaderKey(k[len(http.TrailerPrefix):]), vs)
		}
	}
	_, _ = bw.WriteString("\r\n")
}

// declaredTrailers lists the keys the Trailer header declares.
func (w *response) declaredTrailers() []string {
	var keys []string
	for _, decl := range w.h["Trailer"] {
		for _, k := range strings.Split(decl, ",") {
			if k = strings.TrimSpace(k); k != "" {
				keys = append(keys, http.CanonicalHeaderKey(k))
			}
		}
	}
	return keys
}

// date is the Date header's value, formatted once a second per connection.
func (c *conn) date() []byte {
	now := time.Now()
	if sec := now.Unix(); sec != c.dateSec || c.dateBuf == nil {
		c.dateSec = sec
		c.dateBuf = now.UTC().AppendFormat(c.dateBuf[:0], http.TimeFormat)
	}
	return c.dateBuf
}

// oneLine makes the line breaks in a header value spaces (net/http's headerNewlineToSpace).
func oneLine(v string) string {
	if !strings.ContainsAny(v, "\r\n") {
		return v
	}
	return newlineToSpace.Replace(v)
}

var newlineToSpace = strings.NewReplacer("\r", " ", "\n", " ")
