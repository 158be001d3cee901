package h1

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"
)

// seen is what a handler sees of a request and what its ResponseWriter lets it do, in a form
// two servers can be compared on: errors as text, addresses as what they name.
type seen struct {
	Method                 string
	URL                    url.URL
	RequestURI, Proto      string
	ProtoMajor, ProtoMinor int
	Header                 http.Header
	Host                   string
	ContentLength          int64
	TransferEncoding       []string
	Close                  bool
	Trailer                http.Header
	RemoteAddr             string // "127.0.0.1:port" when it is one
	TLS, GetBody, Response bool   // non-nil
	NoBody                 bool   // Body is http.NoBody
	Pattern                string
	BodyRead               string // the body, read before or after the flush (seenCase.readLate)
	BodyErr                string // how reading it ended, io.EOF left out
	Form, PostForm         url.Values
	FormErr                string

	Server     bool   // the context holds http.ServerContextKey
	LocalAddr  string // "listener" when it is the server's listening address
	DoneNil    bool   // Done() is nil
	DoneClosed bool   // Done() closed while the handler runs and the client waits

	SetReadDeadline, SetWriteDeadline, EnableFullDuplex string // ResponseController errors
	FlushErr                                            string
	FlushReached                                        bool // the flushed part reached the client before the handler returned
	Hijacker, CloseNotifier                             bool // the writer implements them
}

// seenCase is a request sent to both servers.
type seenCase struct {
	name, method, raw string
	// readLate: the handler flushes its answer's first part before it reads the body;
	// fullDuplex: it calls EnableFullDuplex first.
	readLate, fullDuplex bool
	// unserved: net/http's server answers the request itself (OPTIONS *), never the handler;
	// handedOff: the loop leaves the request to its net/http server.
	unserved, handedOff bool
}

// errText is err as text, "" for nil and io.EOF.
func errText(err error) string {
	if err == nil || err == io.EOF {
		return ""
	}
	return err.Error()
}

// probe records what the handler sees of each request, flushes "partial" and waits for the
// client to confirm it (reached), then writes "rest".
func probe(c seenCase, got chan<- seen, reached <-chan struct{}) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var s seen
		s.Method, s.URL, s.RequestURI = r.Method, *r.URL, r.RequestURI
		s.Proto, s.ProtoMajor, s.ProtoMinor = r.Proto, r.ProtoMajor, r.ProtoMinor
		s.Header, s.Host, s.ContentLength = r.Header.Clone(), r.Host, r.ContentLength
		s.TransferEncoding, s.Close, s.Trailer = r.TransferEncoding, r.Close, r.Trailer
		s.RemoteAddr = r.RemoteAddr
		if host, port, err := net.SplitHostPort(r.RemoteAddr); err == nil && host == "127.0.0.1" && port != "" {
			s.RemoteAddr = "127.0.0.1:port"
		}
		s.TLS, s.GetBody, s.Response = r.TLS != nil, r.GetBody != nil, r.Response != nil
		s.NoBody = r.Body == http.NoBody
		s.Pattern = r.Pattern

		ctx := r.Context()
		s.Server = ctx.Value(http.ServerContextKey) != nil
		if la, ok := ctx.Value(http.LocalAddrContextKey).(net.Addr); ok {
			s.LocalAddr = la.String()
		}
		s.DoneNil = ctx.Done() == nil
		select {
		case <-ctx.Done():
			s.DoneClosed = true
		default:
		}

		readBody := func() {
			if strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
				s.FormErr = errText(r.ParseForm())
			}
			b, err := io.ReadAll(r.Body)
			s.BodyRead, s.BodyErr = string(b), errText(err)
			if s.FormErr == "" && s.Form == nil {
				s.FormErr = errText(r.ParseForm())
			}
			s.Form, s.PostForm = r.Form, r.PostForm
		}
		rc := http.NewResponseController(w)
		if c.fullDuplex {
			s.EnableFullDuplex = errText(rc.EnableFullDuplex())
		}
		if !c.readLate {
			readBody()
		}
		_, s.Hijacker = w.(http.Hijacker)
		//lint:ignore SA1019 compared on purpose: net/http's writer still offers it
		_, s.CloseNotifier = w.(http.CloseNotifier)
		s.SetReadDeadline = errText(rc.SetReadDeadline(time.Time{}))
		s.SetWriteDeadline = errText(rc.SetWriteDeadline(time.Time{}))

		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, "partial")
		s.FlushErr = errText(rc.Flush())
		select {
		case <-reached:
			s.FlushReached = true
		case <-time.After(2 * time.Second):
		}
		if c.readLate {
			readBody()
		}
		if !c.fullDuplex {
			// Last: under net/http it would leave the rest of a body unread at the answer's end.
			s.EnableFullDuplex = errText(rc.EnableFullDuplex())
		}
		_, _ = io.WriteString(w, "rest")
		got <- s
	})
}

// see sends c's request to addr and returns what the handler saw; the client confirms the
// flushed part (the head, and "partial" unless HEAD) as soon as it has it.
func (c seenCase) see(t *testing.T, addr string, got <-chan seen, reached chan<- struct{}) seen {
	t.Helper()
	cl := dial(t, addr)
	cl.send(c.raw)
	if c.unserved {
		resp, body := cl.mustRead(c.method)
		select {
		case s := <-got:
			t.Fatalf("the handler was called: %+v", s)
		default:
		}
		return seen{Method: fmt.Sprintf("not served: %d %q", resp.StatusCode, body)}
	}
	resp, err := http.ReadResponse(cl.br, &http.Request{Method: c.method})
	if err != nil {
		t.Fatalf("reading the head: %v", err)
	}
	if c.method != http.MethodHead {
		buf := make([]byte, len("partial"))
		if _, err := io.ReadFull(resp.Body, buf); err != nil || string(buf) != "partial" {
			t.Fatalf("reading the flushed part: %q, %v", buf, err)
		}
	}
	close(reached)
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	if want := map[bool]string{true: "", false: "rest"}[c.method == http.MethodHead]; string(b) != want {
		t.Fatalf("answer ends %q, want %q", b, want)
	}
	s := wait(t, got, "probe")
	if s.LocalAddr == addr {
		s.LocalAddr = "listener"
	}
	return s
}

// TestHandlerSeesAsNetHTTP holds what a handler sees of a request, and what its ResponseWriter
// offers, to what net/http's server gives it. Requests the loop does not take (OPTIONS *, a
// target with '#') are served by its net/http server and must look the same too. Left out as
// differences the package comment lists: Hijacker (not offered; upgrades go to net/http).
func TestHandlerSeesAsNetHTTP(t *testing.T) {
	form := "a=1&b=%C3%A9&a=3"
	cases := []seenCase{
		{name: "get with query and repeated headers", method: "GET", raw: "GET /p/a.b;c?x=1&y=%20&x=2&z HTTP/1.1\r\n" +
			"Host: example.com:8080\r\nX-Multi: one\r\nx-multi: two\r\nX-MULTI:\t three \r\nAccept-Encoding: gzip\r\n" +
			"x-workspace-id: w1\r\nPragma: no-cache\r\nX-Empty:\r\n\r\n"},
		{name: "head", method: "HEAD", raw: "HEAD /h?q HTTP/1.1\r\nHost: example.com\r\n\r\n"},
		{name: "connection close", method: "GET", raw: "GET / HTTP/1.1\r\nHost: example.com\r\nConnection: keep-alive, Close\r\n\r\n"},
		{name: "post form", method: "POST", raw: "POST /f?a=0&q HTTP/1.1\r\nHost: example.com\r\n" +
			"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: " + fmt.Sprint(len(form)) + "\r\n\r\n" + form},
		{name: "post text", method: "POST", raw: "POST /t HTTP/1.1\r\nHost: example.com\r\n" +
			"Content-Type: text/plain\r\nContent-Length: 11\r\n\r\nhello world"},
		{name: "post read after flush", method: "POST", readLate: true, raw: "POST /t HTTP/1.1\r\nHost: example.com\r\n" +
			"Content-Type: text/plain\r\nContent-Length: 11\r\n\r\nhello world"},
		{name: "post read after flush, full duplex", method: "POST", readLate: true, fullDuplex: true,
			raw: "POST /t HTTP/1.1\r\nHost: example.com\r\nContent-Type: text/plain\r\nContent-Length: 11\r\n\r\nhello world"},
		{name: "post empty", method: "POST", raw: "POST /e HTTP/1.1\r\nHost: example.com\r\nContent-Length: 0\r\n\r\n"},
		{name: "options star", unserved: true, method: "OPTIONS", raw: "OPTIONS * HTTP/1.1\r\nHost: example.com\r\n\r\n"},
		{name: "escapes", method: "GET", raw: "GET /a%20b/%2F/c%41?k=%2F&%26=v&m=a+b HTTP/1.1\r\nHost: example.com\r\n\r\n"},
		{name: "escapes and hash", handedOff: true, method: "GET", raw: "GET /a%23b/c#frag?x=1 HTTP/1.1\r\nHost: example.com\r\n\r\n"},
		{name: "lone question mark", method: "GET", raw: "GET /q? HTTP/1.1\r\nHost: example.com\r\n\r\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			run := func(start func(http.Handler) string) seen {
				got, reached := make(chan seen, 1), make(chan struct{})
				return c.see(t, start(probe(c, got, reached)), got, reached)
			}
			want := run(func(h http.Handler) string { return startStd(t, h, nil) })
			got := run(func(h http.Handler) string { _, addr, _ := startH1(t, h, nil); return addr })
			if !c.unserved && !want.Hijacker {
				t.Errorf("net/http's writer is no http.Hijacker")
			}
			if got.Hijacker != c.handedOff {
				t.Errorf("h1's writer is an http.Hijacker: %v; the package comment says it is only for what net/http serves", got.Hijacker)
			}
			got.Hijacker = want.Hijacker // not offered, on purpose (package comment)
			if c.readLate && !c.fullDuplex {
				// Every request of the loop's is full duplex (package comment): the body stays
				// readable after the answer's head went out, where net/http reads it off then.
				if got.BodyRead != "hello world" || want.BodyErr != http.ErrBodyReadAfterClose.Error() {
					t.Errorf("a body read after the head went out: h1 %q %q, net/http %q %q; want the body, and %q",
						got.BodyRead, got.BodyErr, want.BodyRead, want.BodyErr, http.ErrBodyReadAfterClose)
				}
				got.BodyRead, got.BodyErr = want.BodyRead, want.BodyErr
			}
			if d := diffSeen(got, want); d != "" {
				t.Errorf("what the handler saw differs (h1, then net/http):\n%s", d)
			}
		})
	}
}

// diffSeen lists the fields where got and want differ.
func diffSeen(got, want seen) string {
	var b strings.Builder
	g, w := reflect.ValueOf(got), reflect.ValueOf(want)
	for i := 0; i < g.NumField(); i++ {
		if !reflect.DeepEqual(g.Field(i).Interface(), w.Field(i).Interface()) {
			fmt.Fprintf(&b, "  %s: %+v\n  %s: %+v\n", g.Type().Field(i).Name, g.Field(i).Interface(),
				strings.Repeat(" ", len(g.Type().Field(i).Name)), w.Field(i).Interface())
		}
	}
	return b.String()
}

// TestCloseNotifyOnHangUp: http.CloseNotifier's channel fires when the client hangs up while
// the handler runs, under both servers, and not for a request that ends normally.
func TestCloseNotifyOnHangUp(t *testing.T) {
	for _, name := range []string{"net/http", "h1"} {
		t.Run(name, func(t *testing.T) {
			fired := make(chan bool, 2)
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				//lint:ignore SA1019 what is tested
				ch := w.(http.CloseNotifier).CloseNotify()
				if r.URL.Path == "/quick" {
					_, _ = io.WriteString(w, "quick")
					go func() {
						select {
						case <-ch:
							fired <- false
						case <-time.After(time.Second):
						}
					}()
					return
				}
				select {
				case <-ch:
					fired <- true
				case <-time.After(hung):
				}
			})
			c := dial(t, startNamed(t, name, h))
			c.send("GET /quick HTTP/1.1\r\nHost: example.com\r\n\r\n")
			if _, body := c.mustRead("GET"); body != "quick" {
				t.Fatalf("answer %q", body)
			}
			c.send("GET /wait HTTP/1.1\r\nHost: example.com\r\n\r\n")
			time.Sleep(50 * time.Millisecond) // the handler runs
			_ = c.nc.Close()
			if !wait(t, fired, "close notification") {
				t.Fatal("CloseNotify fired for a request that ended normally")
			}
		})
	}
}

// TestWriterAsNetHTTP: what a handler's calls on its writer return, and what they send, under
// both servers (runDiff). Not compared, as the package comment lists it: a header changed
// after WriteHeader when the head has not gone out yet (the loop sends it, net/http does not).
func TestWriterAsNetHTTP(t *testing.T) {
	runDiff(t, []diffCase{
		{name: "header changed after WriteHeader and a flush", h: func(w http.ResponseWriter, r *http.Request, note func(string)) {
			w.Header().Set("X-Before", "1")
			w.WriteHeader(http.StatusAccepted)
			w.(http.Flusher).Flush()
			w.Header().Set("X-After", "2")
			w.Header().Del("X-Before")
			noteWrite(w, "body", note)
		}},
		{name: "WriteHeader twice", h: func(w http.ResponseWriter, r *http.Request, note func(string)) {
			w.WriteHeader(http.StatusCreated)
			w.WriteHeader(http.StatusNotFound)
			n, err := w.Write([]byte("x"))
			note(fmt.Sprintf("write %d %v", n, err))
		}},
		{name: "103, header changed, then 200", steps: []step{{send: get, read: []string{"GET", "GET"}}},
			h: func(w http.ResponseWriter, r *http.Request, note func(string)) {
				w.Header().Set("Link", "</a.css>; rel=preload")
				w.WriteHeader(http.StatusEarlyHints)
				w.Header().Del("Link")
				w.Header().Set("X-Final", "yes")
				w.WriteHeader(http.StatusOK)
				noteWrite(w, "final", note)
			}},
		{name: "1xx after the final status", h: func(w http.ResponseWriter, r *http.Request, note func(string)) {
			w.WriteHeader(http.StatusOK)
			w.WriteHeader(http.StatusEarlyHints)
			noteWrite(w, "final", note)
		}},
		{name: "101 without a hijack", h: func(w http.ResponseWriter, r *http.Request, note func(string)) {
			w.Header().Set("Content-Length", "1")
			w.WriteHeader(http.StatusSwitchingProtocols)
			n, err := w.Write([]byte("x"))
			note(fmt.Sprintf("write %d %v", n, err))
		}},
		{name: "empty writes", h: func(w http.ResponseWriter, r *http.Request, note func(string)) {
			n, err := w.Write(nil)
			note(fmt.Sprintf("first %d %v", n, err))
			noteWrite(w, "x", note)
		}},
		{name: "empty write on 204", h: func(w http.ResponseWriter, r *http.Request, note func(string)) {
			w.WriteHeader(http.StatusNoContent)
			n, err := w.Write(nil)
			note(fmt.Sprintf("empty %d %v", n, err))
			n, err = w.Write([]byte("x"))
			note(fmt.Sprintf("one byte %d %v", n, err))
		}},
		{name: "empty write with a content length", h: func(w http.ResponseWriter, r *http.Request, note func(string)) {
			w.Header().Set("Content-Length", "2")
			n, err := w.Write([]byte{})
			note(fmt.Sprintf("empty %d %v", n, err))
			noteWrite(w, "ok", note)
		}},
		{name: "write past the content length", h: func(w http.ResponseWriter, r *http.Request, note func(string)) {
			w.Header().Set("Content-Length", "2")
			n, err := w.Write([]byte("abc"))
			note(fmt.Sprintf("write %d %v", n, err))
			noteWrite(w, "ab", note)
		}},
		{name: "flush errors", h: func(w http.ResponseWriter, r *http.Request, note func(string)) {
			rc := http.NewResponseController(w)
			note(fmt.Sprintf("flush %v", rc.Flush()))
			note(fmt.Sprintf("flush %v", rc.Flush()))
			noteWrite(w, "after", note)
		}},
	})
}

// TestLeftoverWriterAfterReturn: a goroutine the handler leaves behind that uses the writer
// after the handler returned, while the next request on the connection is served, neither
// panics nor reaches the next answer. Only h1 is run: under net/http the same is a data race
// on a writer that has gone back to a pool (its documentation forbids it).
func TestLeftoverWriterAfterReturn(t *testing.T) {
	goOn := make(chan struct{})
	used := make(chan []string, 1)
	_, addr, _ := startH1(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/leave":
			go func() {
				var errs []string
				defer func() {
					if p := recover(); p != nil {
						errs = append(errs, fmt.Sprint("panic: ", p))
					}
					used <- errs
				}()
				<-goOn
				w.Header().Set("X-Leak", "1")
				w.WriteHeader(http.StatusInternalServerError)
				_, err := io.WriteString(w, "leak")
				errs = append(errs, fmt.Sprint("write: ", err))
				errs = append(errs, fmt.Sprint("flush: ", http.NewResponseController(w).Flush()))
				w.(http.Flusher).Flush()
				_, _ = io.WriteString(w, "leak again")
			}()
			_, _ = io.WriteString(w, "first")
		case "/next":
			// The first request's writer is used while this one runs, before its head is out.
			close(goOn)
			errs := wait(t, used, "the leftover writes")
			used <- errs
			_, _ = io.WriteString(w, "next")
		default:
			_, _ = io.WriteString(w, "after")
		}
	}), nil)
	c := dial(t, addr)
	c.send("GET /leave HTTP/1.1\r\nHost: example.com\r\n\r\n")
	if _, body := c.mustRead("GET"); body != "first" {
		t.Fatalf("first answer %q", body)
	}
	c.send("GET /next HTTP/1.1\r\nHost: example.com\r\n\r\nGET /after HTTP/1.1\r\nHost: example.com\r\n\r\n")
	resp, body := c.mustRead("GET")
	if resp.StatusCode != http.StatusOK || body != "next" || resp.Header.Get("X-Leak") != "" {
		t.Errorf("the next answer: %d %q %q", resp.StatusCode, resp.Header, body)
	}
	if resp, body := c.mustRead("GET"); resp.StatusCode != http.StatusOK || body != "after" {
		t.Errorf("the answer after: %d %q", resp.StatusCode, body)
	}
	errs := wait(t, used, "the leftover writes")
	if want := []string{"write: " + http.ErrHijacked.Error(), "flush: " + http.ErrHijacked.Error()}; !reflect.DeepEqual(errs, want) {
		t.Errorf("the leftover writer gave %q, want %q", errs, want)
	}
}

// TestWriterDifferencesAsDocumented holds the differences the package comment lists for what a
// handler does with its writer: each case runs under both servers, and each must answer as
// the comment says (a difference that goes away is a comment to change).
func TestWriterDifferencesAsDocumented(t *testing.T) {
	type documented struct {
		diffCase
		check func(loop, std outcome) bool
	}
	post := []step{{send: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\n0123456789", read: []string{"POST"}}}
	cases := []documented{
		{diffCase{name: "header set after WriteHeader, head not out yet", h: func(w http.ResponseWriter, r *http.Request, note func(string)) {
			w.WriteHeader(http.StatusOK)
			w.Header().Set("X-Late", "1")
			noteWrite(w, "x", note)
		}}, func(loop, std outcome) bool {
			return loop.Answers[0].Header.Get("X-Late") == "1" && std.Answers[0].Header.Get("X-Late") == ""
		}},
		{diffCase{name: "transfer encoding chunked set by the handler", h: func(w http.ResponseWriter, r *http.Request, note func(string)) {
			w.Header().Set("Transfer-Encoding", "chunked")
			noteWrite(w, "x", note)
		}}, func(loop, std outcome) bool {
			l, s := loop.Answers[0], std.Answers[0]
			return l.Body == "x" && l.ContentLength == 1 && loop.Reused &&
				s.Body == "x" && reflect.DeepEqual(s.TransferEncoding, []string{"chunked"}) && std.Reused
		}},
		{diffCase{name: "transfer encoding identity set by the handler", h: func(w http.ResponseWriter, r *http.Request, note func(string)) {
			w.Header().Set("Transfer-Encoding", "identity")
			noteWrite(w, "x", note)
		}}, func(loop, std outcome) bool {
			l, s := loop.Answers[0], std.Answers[0]
			return l.Body == "x" && l.ContentLength == 1 && loop.Reused &&
				s.Body == "x" && s.ContentLength == -1 && s.Close && !std.Reused
		}},
		{diffCase{name: "body cut by MaxBytesReader", steps: post, h: func(w http.ResponseWriter, r *http.Request, note func(string)) {
			_, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 4))
			note(fmt.Sprint(err))
			noteWrite(w, "x", note)
		}}, func(loop, std outcome) bool {
			return reflect.DeepEqual(loop.Notes, std.Notes) && loop.Reused && !loop.Answers[0].Close &&
				!std.Reused && std.Answers[0].Close
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			loopNotes, stdNotes := make(chan string, 64), make(chan string, 64)
			_, loopAddr, _ := startH1(t, handlerFor(c.diffCase, loopNotes), nil)
			stdAddr := startStd(t, handlerFor(c.diffCase, stdNotes), nil)
			std := c.run(t, stdAddr, stdNotes)
			loop := c.run(t, loopAddr, loopNotes)
			if len(loop.Answers) == 0 || len(std.Answers) == 0 || !c.check(loop, std) {
				t.Errorf("not as the package comment says; h1 answered\n%s\nnet/http answered\n%s", show(loop), show(std))
			}
		})
	}
}

// TestFullDuplex: with EnableFullDuplex, a handler can send its answer's head while a
// goroutine of its own waits in a read of the body, to a client that sends the rest of the
// body only once it has the head (a bidirectional stream), under both servers.
func TestFullDuplex(t *testing.T) {
	for _, name := range []string{"net/http", "h1"} {
		t.Run(name, func(t *testing.T) {
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if err := http.NewResponseController(w).EnableFullDuplex(); err != nil {
					t.Errorf("EnableFullDuplex: %v", err)
				}
				read := make(chan string, 1)
				go func() {
					b, _ := io.ReadAll(r.Body)
					read <- string(b)
				}()
				time.Sleep(50 * time.Millisecond) // the read waits for the rest of the body
				w.WriteHeader(http.StatusOK)
				w.(http.Flusher).Flush()
				select {
				case b := <-read:
					_, _ = io.WriteString(w, "got "+b)
				case <-time.After(hung):
				}
			})
			c := dial(t, startNamed(t, name, h))
			_ = c.nc.SetDeadline(time.Now().Add(3 * time.Second))
			c.send("POST / HTTP/1.1\r\nHost: example.com\r\nContent-Length: 10\r\n\r\n01234")
			resp, err := http.ReadResponse(c.br, &http.Request{Method: "POST"})
			if err != nil {
				t.Fatalf("the head did not come before the rest of the body: %v", err)
			}
			c.send("56789")
			if b, err := io.ReadAll(resp.Body); err != nil || string(b) != "got 0123456789" {
				t.Fatalf("answer %q, %v", b, err)
			}
		})
	}
}

// startNamed serves h under the server name names ("h1", or net/http's) and returns its address.
func startNamed(t *testing.T, name string, h http.Handler) string {
	t.Helper()
	if name == "h1" {
		_, addr, _ := startH1(t, h, nil)
		return addr
	}
	return startStd(t, h, nil)
}
