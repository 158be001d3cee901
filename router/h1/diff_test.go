package h1

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A diffCase is raw bytes sent to an h1.Server and to a net/http server with the same handler;
// the two must answer alike: status, header, framing, body, trailers, and whether the
// connection carries another request afterwards.
type diffCase struct {
	name string
	h    func(w http.ResponseWriter, r *http.Request, note func(string))
	// steps are sent in turn on one connection; a case without steps sends get once.
	steps []step
	// set, when not nil, sets the limits of both servers.
	set func(*http.Server)
}

// step writes send (then half-closes the connection if closeWrite), then reads one answer per
// method in read (1xx answers count).
type step struct {
	send       string
	closeWrite bool
	read       []string
}

const get = "GET / HTTP/1.1\r\nHost: example.com\r\n\r\n"

// answer is what a client sees of one answer.
type answer struct {
	Status           int
	Header           http.Header // Date left out
	ContentLength    int64
	TransferEncoding []string
	Close            bool
	Body             string
	BodyErr          string
	Trailer          http.Header
}

// outcome is what a client sees of a whole case.
type outcome struct {
	Answers []answer
	Err     string   // how the last read failed, if it did
	Reused  bool     // the connection answered one more request after the steps
	Notes   []string // what the handler saw (errors of its writes)
}

func (c diffCase) run(t *testing.T, addr string, notes chan string) outcome {
	t.Helper()
	cl := dial(t, addr)
	steps := c.steps
	if steps == nil {
		steps = []step{{send: get, read: []string{"GET"}}}
	}
	var out outcome
	for _, st := range steps {
		// Written aside: a server that refuses a request may close before reading all of it.
		wrote := make(chan struct{})
		go func() {
			defer close(wrote)
			_, _ = io.WriteString(cl.nc, st.send)
			if st.closeWrite {
				_ = cl.nc.(*net.TCPConn).CloseWrite()
			}
		}()
		for _, m := range st.read {
			resp, b, err := cl.read(m)
			if resp != nil {
				out.Answers = append(out.Answers, answerOf(resp, b, err))
			}
			if err != nil {
				if resp == nil {
					out.Err = errKind(err)
				}
				break
			}
		}
		<-wrote
	}
	if out.Err == "" && !steps[len(steps)-1].closeWrite && (len(out.Answers) == 0 || out.Answers[len(out.Answers)-1].BodyErr == "") {
		// A connection the server closed may refuse the write too.
		if _, err := io.WriteString(cl.nc, "GET /probe HTTP/1.1\r\nHost: example.com\r\n\r\n"); err == nil {
			_, b, err := cl.read("GET")
			out.Reused = err == nil && string(b) == "probe"
		}
	}
	// The handler sent its notes before it returned, and it returned before the connection
	// closed or answered the probe.
	for {
		select {
		case n := <-notes:
			out.Notes = append(out.Notes, n)
			continue
		default:
		}
		break
	}
	return out
}

func answerOf(resp *http.Response, body []byte, err error) answer {
	h := resp.Header.Clone()
	delete(h, "Date")
	return answer{
		Status:           resp.StatusCode,
		Header:           h,
		ContentLength:    resp.ContentLength,
		TransferEncoding: resp.TransferEncoding,
		Close:            resp.Close,
		Body:             string(body),
		BodyErr:          errKind(err),
		Trailer:          resp.Trailer,
	}
}

// errKind names a read error the same way for both servers: a connection closed, or cut
// short mid-answer.
func errKind(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "cut"
	case errors.Is(err, io.EOF), errors.Is(err, syscall.ECONNRESET):
		return "closed"
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return "timeout"
	}
	return err.Error()
}

// handlerFor wraps a case's handler: /probe answers "probe", and what the handler notes goes
// to notes.
func handlerFor(c diffCase, notes chan<- string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/probe" {
			_, _ = io.WriteString(w, "probe")
			return
		}
		var mine []string
		defer func() {
			for _, n := range mine {
				notes <- n
			}
		}()
		c.h(w, r, func(s string) { mine = append(mine, s) })
	})
}

func runDiff(t *testing.T, cases []diffCase) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			loopNotes, stdNotes := make(chan string, 64), make(chan string, 64)
			_, loopAddr, _ := startH1(t, handlerFor(c, loopNotes), func(s *Server) {
				if c.set != nil {
					var hs http.Server
					c.set(&hs)
					s.MaxHeaderBytes = hs.MaxHeaderBytes
				}
			})
			stdAddr := startStd(t, handlerFor(c, stdNotes), c.set)
			want := c.run(t, stdAddr, stdNotes)
			got := c.run(t, loopAddr, loopNotes)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("h1 answered\n%s\nnet/http answered\n%s", show(got), show(want))
			}
		})
	}
}

func show(o outcome) string {
	var b strings.Builder
	for i, a := range o.Answers {
		fmt.Fprintf(&b, "  [%d] %d %q length %d te %q close %v\n      body %q %s trailer %q\n",
			i, a.Status, a.Header, a.ContentLength, a.TransferEncoding, a.Close, trunc(a.Body), a.BodyErr, a.Trailer)
	}
	fmt.Fprintf(&b, "  err %q reused %v notes %q", o.Err, o.Reused, o.Notes)
	return b.String()
}

func trunc(s string) string {
	if len(s) > 80 {
		return fmt.Sprintf("%s…(%d bytes)", s[:80], len(s))
	}
	return s
}

// noteWrite writes p and notes the error, if any.
func noteWrite(w io.Writer, p string, note func(string)) {
	if _, err := io.WriteString(w, p); err != nil {
		note("write: " + err.Error())
	}
}

// echo answers with what the handler saw of the request, body included.
func echo(w http.ResponseWriter, r *http.Request, note func(string)) {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		note("read: " + err.Error())
	}
	fmt.Fprintf(w, "%s %s %s host=%q length=%d te=%q close=%v x=%q\n%s",
		r.Method, r.RequestURI, r.Proto, r.Host, r.ContentLength, r.TransferEncoding, r.Close,
		r.Header.Get("X"), b)
}

// TestAnswersAsNetHTTP holds the loop's answers to net/http's. Not compared, as they differ on
// purpose or harmlessly: a header set after the first Write of a short body (the loop sends it,
// net/http drops it: package comment); a handler's invalid Content-Length (both drop it,
// net/http then chunks the answer, the loop gives it its real length); bytes written after a
// Flush when the handler panics (net/http loses up to 2048 of them, the loop sends them).
func TestAnswersAsNetHTTP(t *testing.T) {
	big := strings.Repeat("0123456789abcdef", 200) // 3200 bytes
	head := func(extra string) string {
		return "HEAD / HTTP/1.1\r\nHost: example.com\r\n" + extra + "\r\n"
	}
	one := func(send string, methods ...string) []step { return []step{{send: send, read: methods}} }
	runDiff(t, []diffCase{
		{name: "nothing written", h: func(w http.ResponseWriter, r *http.Request, note func(string)) {}},
		{name: "small text", h: func(w http.ResponseWriter, r *http.Request, note func(string)) {
			noteWrite(w, "hello, world", note)
		}},
		{name: "small html in two writes", h: func(w http.ResponseWriter, r *http.Request, note func(string)) {
			noteWrite(w, "<!DOCTYPE html><html>", note)
			noteWrite(w, "<body>hi</body></html>", note)
		}},
		{name: "exactly 2048", h: func(w http.ResponseWriter, r *http.Request, note func(string)) {
			noteWrite(w, big[:2048], note)
		}},
		{name: "2049 in one write", h: func(w http.ResponseWriter, r *http.Request, note func(string)) {
			noteWrite(w, big[:2049], note)
		}},
		{name: "over 2048 in two writes", h: func(w http.ResponseWriter, r *http.Request, note func(string)) {
			noteWrite(w, big[:1000], note)
			noteWrite(w, big[1000:2500], note)
		}},
		{name: "tiny write then a large one", h: func(w http.ResponseWriter, r *http.Request, note func(string)) {
			noteWrite(w, "<ht", note) // alone it sniffs as text/plain
			_, _ = w.Write([]byte("ml><body>" + big))
		}},
		{name: "content type set", h: func(w http.ResponseWriter, r *http.Request, note func(string)) {
			w.Header().Set("Content-Type", "application/json")
			noteWrite(w, big, note)
		}},
		{name: "content type suppressed", h: func(w http.ResponseWriter, r *http.Request, note func(string)) {
			w.Header()["Content-Type"] = nil
			noteWrite(w, "hello", note)
		}},
		{name: "content encoding: no sniffing", h: func(w http.ResponseWriter, r *http.Request, note func(string)) {
			w.Header().Set("Content-Encoding", "gzip")
			noteWrite(w, "\x1f\x8b\x08\x00\x00\x00\x00\x00", note)
		}},
		{name: "flush mid-way", h: func(w http.ResponseWriter, r *http.Request, note func(string)) {
			noteWrite(w, "<html>first", note)
			w.(http.Flusher).Flush()
			noteWrite(w, " second", note)
		}},
		{name: "flush first", h: func(w http.ResponseWriter, r *http.Request, note func(string)) {
			w.(http.Flusher).Flush()
			noteWrite(w, "late", note)
		}},
		{name: "flush through ResponseController", h: func(w http.ResponseWriter, r *http.Request, note func(string)) {
			w.WriteHeader(http.StatusAccepted)
			if err := http.NewResponseController(w).Flush(); err != nil {
				note("flush: " + err.Error())
			}
		}},
		{name: "content length kept", h: func(w http.ResponseWriter, r *http.Request, note func(string)) {
			w.Header().Set("Content-Length", "5")
			noteWrite(w, "hello", note)
		}},
		{name: "content length, less written", h: func(w http.ResponseWriter, r *http.Request, note func(string)) {
			w.Header().Set("Content-Length", "10")
			noteWrite(w, "hello", note)
		}},
		{name: "content length, more written", h: func(w http.ResponseWriter, r *http.Request, note func(string)) {
			w.Header().Set("Content-Length", "5")
			noteWrite(w, "abc", note)
			noteWrite(w, "defgh", note)
		}},
		{name: "head, nothing written", steps: one(head(""), "HEAD"),
			h: func(w http.ResponseWriter, r *http.Request, note func(string)) {}},
		{name: "head, small body written", steps: one(head(""), "HEAD"),
			h: func(w http.ResponseWriter, r *http.Request, note func(string)) { noteWrite(w, "hello", note) }},
		{name: "head, large body written", steps: one(head(""), "HEAD"),
			h: func(w http.ResponseWriter, r *http.Request, note func(string)) { noteWrite(w, big, note) }},
		{name: "head, flushed", steps: one(head(""), "HEAD"),
			h: func(w http.ResponseWriter, r *http.Request, note func(string)) {
				noteWrite(w, "<html>", note)
				w.(http.Flusher).Flush()
				noteWrite(w, "more", note)
			}},
		{name: "head, content length set, more written", steps: one(head(""), "HEAD"),
			h: func(w http.ResponseWriter, r *http.Request, note func(string)) {
				w.Header().Set("Content-Length", "3")
				noteWrite(w, "hello", note)
			}},
		{name: "head, content length set", steps: one(head(""), "HEAD"),
			h: func(w http.ResponseWriter, r *http.Request, note func(string)) {
				w.Header().Set("Content-Length", "1234")
				w.Header().Set("Content-Type", "image/png")
			}},
		{name: "204", h: func(w http.ResponseWriter, r *http.Request, note func(string)) {
			w.Header().Set("Content-Type", "text/plain")
			w.Header().Set("Content-Length", "5")
			w.WriteHeader(http.StatusNoContent)
			noteWrite(w, "hello", note)
		}},
		{name: "304", h: func(w http.ResponseWriter, r *http.Request, note func(string)) {
			w.Header().Set("Content-Type", "text/plain")
			w.Header().Set("Content-Length", "5")
			w.Header().Set("Etag", `"x"`)
			w.WriteHeader(http.StatusNotModified)
			noteWrite(w, "hello", note)
		}},
		{name: "103 then 200", steps: one(get, "GET", "GET"),
			h: func(w http.ResponseWriter, r *http.Request, note func(string)) {
				w.Header().Set("Link", "</style.css>; rel=preload; as=style")
				w.WriteHeader(http.StatusEarlyHints)
				w.Header().Set("Content-Type", "text/plain")
				noteWrite(w, "hints sent", note)
			}},
		{name: "two final statuses", h: func(w http.ResponseWriter, r *http.Request, note func(string)) {
			w.WriteHeader(http.StatusTeapot)
			w.WriteHeader(http.StatusInternalServerError)
			noteWrite(w, "tea", note)
		}},
		{name: "status without text", h: func(w http.ResponseWriter, r *http.Request, note func(string)) {
			w.WriteHeader(599)
		}},
		{name: "http.Error", h: func(w http.ResponseWriter, r *http.Request, note func(string)) {
			http.Error(w, "no such thing", http.StatusNotFound)
		}},
		{name: "declared trailer, small body", h: func(w http.ResponseWriter, r *http.Request, note func(string)) {
			w.Header().Set("Trailer", "X-Sum, X-Other")
			noteWrite(w, "body", note)
			w.Header().Set("X-Sum", "42")
		}},
		{name: "declared trailer, large body", h: func(w http.ResponseWriter, r *http.Request, note func(string)) {
			w.Header().Add("Trailer", "X-Sum")
			noteWrite(w, big, note)
			w.Header().Set("X-Sum", "42")
		}},
		{name: "prefixed trailer, small body", h: func(w http.ResponseWriter, r *http.Request, note func(string)) {
			noteWrite(w, "body", note)
			w.Header().Set(http.TrailerPrefix+"X-Sum", "42")
		}},
		{name: "prefixed trailer after flush", h: func(w http.ResponseWriter, r *http.Request, note func(string)) {
			noteWrite(w, "body", note)
			w.(http.Flusher).Flush()
			w.Header().Set(http.TrailerPrefix+"X-Sum", "42")
		}},
		{name: "abort panic", h: func(w http.ResponseWriter, r *http.Request, note func(string)) {
			panic(http.ErrAbortHandler)
		}},
		{name: "panic", h: func(w http.ResponseWriter, r *http.Request, note func(string)) {
			noteWrite(w, "partial", note)
			panic("boom")
		}},
		{name: "panic after flush", h: func(w http.ResponseWriter, r *http.Request, note func(string)) {
			noteWrite(w, "partial", note)
			w.(http.Flusher).Flush()
			// Not a write here: net/http would hold it in its 2048-byte buffer and lose it,
			// the loop sends it (a cut answer either way).
			panic(http.ErrAbortHandler)
		}},
		{name: "panic mid-way through a large body", h: func(w http.ResponseWriter, r *http.Request, note func(string)) {
			// One Write: net/http's buffer passes it through whole (a WriteString would be
			// copied through it 2048 bytes at a time).
			_, _ = w.Write([]byte(big))
			panic(http.ErrAbortHandler)
		}},
		{name: "header values with line breaks", h: func(w http.ResponseWriter, r *http.Request, note func(string)) {
			w.Header().Set("X-Multi", "a\nb\r\nc")
			w.Header().Set("X-Spaced", "  d  ")
			w.Header()["Bad Name"] = []string{"x"}
			noteWrite(w, "ok", note)
		}},
		{name: "handler says close", h: func(w http.ResponseWriter, r *http.Request, note func(string)) {
			w.Header().Set("Connection", "close")
			noteWrite(w, "bye", note)
		}},
		{name: "client says close", steps: one("GET / HTTP/1.1\r\nHost: example.com\r\nConnection: close\r\n\r\n", "GET"),
			h: echo},
		{name: "request fields", h: echo, steps: one(
			"DELETE /a/%2F/b?c=d&e HTTP/1.1\r\nHost: example.com:81\r\nX:  v \r\nPragma: no-cache\r\n\r\n", "DELETE")},
		{name: "pipelined", h: echo, steps: []step{{
			send: "GET /1 HTTP/1.1\r\nHost: a\r\n\r\n" +
				"POST /2 HTTP/1.1\r\nHost: b\r\nContent-Length: 5\r\n\r\nhello" +
				"GET /3 HTTP/1.1\r\nHost: c\r\n\r\n",
			read: []string{"GET", "POST", "GET"},
		}}},
		{name: "close then pipelined", h: echo, steps: []step{{
			send: "GET /1 HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\nGET /2 HTTP/1.1\r\nHost: a\r\n\r\n",
			read: []string{"GET", "GET"},
		}}},
		{name: "body closed unread, small", steps: one(
			"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\n0123456789", "POST"),
			h: func(w http.ResponseWriter, r *http.Request, note func(string)) {
				_ = r.Body.Close()
				_, err := r.Body.Read(make([]byte, 1))
				note(fmt.Sprintf("read after close: %v", err))
			}},
		{name: "body closed unread, over the discard limit", steps: one(
			"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 300000\r\n\r\n"+strings.Repeat("x", 300000), "POST"),
			h: func(w http.ResponseWriter, r *http.Request, note func(string)) {
				_ = r.Body.Close()
				noteWrite(w, "closed", note)
			}},
		{name: "body echoed", h: echo, steps: one(
			"PUT /up HTTP/1.1\r\nHost: a\r\nContent-Length: 100000\r\n\r\n"+strings.Repeat("x", 100000), "PUT")},
		{name: "body partly read, rest under the discard limit", steps: one(
			"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 200000\r\n\r\n"+strings.Repeat("x", 200000), "POST"),
			h: func(w http.ResponseWriter, r *http.Request, note func(string)) {
				_, _ = io.CopyN(io.Discard, r.Body, 1000)
				noteWrite(w, "read 1000", note)
			}},
		{name: "body unread, over the discard limit", steps: one(
			"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 300000\r\n\r\n"+strings.Repeat("x", 300000), "POST"),
			h: func(w http.ResponseWriter, r *http.Request, note func(string)) {
				noteWrite(w, "read nothing", note)
			}},
		{name: "body unread, exactly the discard limit", steps: one(
			"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 262144\r\n\r\n"+strings.Repeat("x", 262144), "POST"),
			h: func(w http.ResponseWriter, r *http.Request, note func(string)) {
				noteWrite(w, "read nothing", note)
			}},
		{name: "body read deadline", steps: one(
			"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\nhalf", "POST"),
			h: func(w http.ResponseWriter, r *http.Request, note func(string)) {
				if err := http.NewResponseController(w).SetReadDeadline(time.Now().Add(50 * time.Millisecond)); err != nil {
					note("deadline: " + err.Error())
				}
				b, err := io.ReadAll(r.Body)
				note(fmt.Sprintf("read %q deadline exceeded %v", b, errors.Is(err, os.ErrDeadlineExceeded)))
				w.WriteHeader(http.StatusRequestTimeout)
			}},
	})
}
