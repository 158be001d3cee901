package router

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"slidecells/shared/cellproto"
	"slidecells/shared/problem"
	"slidecells/shared/tracing"
)

// attempt is one try of a request on one cell. The ReverseProxy's hooks find it through the
// request context and record what happened instead of writing to the client, so the router can
// still decide to retry after a 421. It is that context itself (the client request's context
// plus itself as a value), which saves an allocation per request.
type attempt struct {
	context.Context
	cell      *cell
	reqID     string
	traceTo   string // the traceparent sent to the cell; "" sends none (see exchange.startTrace)
	epoch     int64
	workspace bool // a workspace route: send the epoch, and a 421 is the router's business
	buffered  bool // the body is in memory; drop Expect: 100-continue

	out         http.ResponseWriter // the client's writer, whose header map the answer's headers go to
	preview     *previewHost        // a preview route: sent to this preview host of cell
	rejected    *problem.Error      // not sent: breaker open or cell unhealthy
	misdirected bool                // the cell answered 421; nothing was written to the client
	owningHint  string              // the cell's X-Owning-Cell on a 421, for logs only
	err         error               // transport failure; nothing was written to the client

	// share is the workspace share holding a place for this attempt (shareWS's), until the
	// cell's answer begins or the attempt ends (releaseShare); nil when none is held.
	share   *workspaceShare
	shareWS string

	// Header values, kept here so that setting them allocates nothing.
	reqIDHeader [1]string
	traceHeader [1]string
	epochHeader [1]string
	xffHeader   [1]string
	xfhHeader   [1]string
}

type attemptKey struct{}

// Value makes the attempt a context that holds itself under attemptKey.
func (a *attempt) Value(key any) any {
	if key == (attemptKey{}) {
		return a
	}
	return a.Context.Value(key)
}

// attemptOf is the attempt whose context ctx is or derives from.
func attemptOf(ctx context.Context) *attempt { return ctx.Value(attemptKey{}).(*attempt) }

// reqIDValue is the request ID as a header value. The value is written once, before the
// request is sent, and never again: the request to the cell and the answer share it.
func (a *attempt) reqIDValue() []string { return a.reqIDHeader[:] }

// Canonical header keys for direct map access on the hot path.
var (
	keyRequestID      = http.CanonicalHeaderKey(cellproto.HeaderRequestID)
	keyPlacementCell  = http.CanonicalHeaderKey(cellproto.HeaderPlacementCell)
	keyPlacementEpoch = http.CanonicalHeaderKey(cellproto.HeaderPlacementEpoch)
	keyCellID         = http.CanonicalHeaderKey(cellproto.HeaderCellID)
	keyWorkspaceID    = http.CanonicalHeaderKey(cellproto.HeaderWorkspaceID)
	keyTraceparent    = http.CanonicalHeaderKey(tracing.Header)
)

// Shared, never written header values: the forwarded protocol (the router serves plain HTTP
// behind its load balancer, or TLS itself) and the empty User-Agent that keeps the transport
// from adding Go's own.
var (
	protoHTTP  = []string{"http"}
	protoHTTPS = []string{"https"}
	noUA       = []string{""}
)

// errMisdirected is returned by ModifyResponse to stop the ReverseProxy from copying a 421.
var errMisdirected = errors.New("router: cell answered 421")

// errExcluded reports an attempt that tells nothing about the cell's health (the client went
// away, or a response broke mid-body); the breaker ignores it.
var errExcluded = errors.New("router: outcome not attributable to the cell")

// routerOnlyRequest are removed from client requests before the router sets its own (a
// client's traceparent is read by exchange.startTrace and sent on in the router's form;
// tracestate is not carried). The
// ReverseProxy already drops Forwarded and X-Forwarded-* in Rewrite mode; they are listed to
// keep the whole rule in one place.
// The keys are canonicalised once because they are deleted from the header map directly.
var routerOnlyRequest = canonicalKeys(
	cellproto.HeaderPlacementEpoch, cellproto.HeaderPlacementCell, cellproto.HeaderOwningCell, cellproto.HeaderCellID, cellproto.HeaderRequestID,
	tracing.Header, "Tracestate", "Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "X-Real-IP",
)

// routerOnlyResponse are internal headers a cell may send that clients must not see.
var routerOnlyResponse = canonicalKeys(cellproto.HeaderPlacementEpoch, cellproto.HeaderPlacementCell, cellproto.HeaderOwningCell)

func canonicalKeys(keys ...string) []string {
	for i, k := range keys {
		keys[i] = http.CanonicalHeaderKey(k)
	}
	return keys
}

// try runs one attempt through the cell's breaker and ReverseProxy.
func (rt *Router) try(x *exchange, r *http.Request, a *attempt) {
	c := a.cell
	breaker, proxy := c.breaker, c.proxy
	if a.preview != nil {
		// The preview host is a process of its own: the cell API's health probes say nothing
		// about it, its own breaker does. A cell marked down serves nothing.
		breaker, proxy = a.preview.breaker, a.preview.proxy
		if c.State() == CellDown {
			e := problem.New(problem.CellUnavailable, "the cell is unavailable; retry shortly")
			e.RetryAfter, e.Retryable = 1, true
			a.rejected = e
			return
		}
	} else if rej := c.admit(); rej != nil {
		a.rejected = rej
		return
	}
	// One workspace's share of the cell first, so that a workspace over it takes no place in
	// the cell's bound. The place is held until the cell's answer begins (modifyResponse), not
	// while the answer is copied: the client sets that pace, and the client may be a stranger
	// (the router does not authenticate), who would otherwise hold the workspace's share by
	// not reading answers (public routes, refusals) that name it.
	if a.workspace {
		if !rt.share.acquire(x.ws, rt.cfg.MaxInFlightPerWorkspace) {
			c.m.wsShed.Inc()
			a.rejected = problem.ErrRateLimited("workspace", 1, "the workspace has too many requests in flight at once; retry shortly")
			return
		}
		a.share, a.shareWS = rt.share, x.ws
		defer a.releaseShare()
	}
	// Back-pressure: beyond the bound, shed at once rather than queue into seconds of latency.
	// Not a breaker failure: the cell did nothing wrong.
	if c.inFlight.Add(1) > int64(rt.cfg.MaxInFlightPerCell) {
		c.inFlight.Add(-1)
		c.m.shed.Inc()
		e := problem.New(problem.CellOverloaded, "the workspace's cell has too many requests in flight; retry shortly")
		e.RetryAfter, e.Retryable = 1, true
		a.rejected = e
		return
	}
	defer c.inFlight.Add(-1)
	done, err := breaker.Allow()
	if err != nil {
		e := a.unavailable("is unavailable; retry shortly")
		e.RetryAfter = int(math.Ceil(rt.cfg.BreakerOpenTimeout.Seconds()))
		a.rejected = e
		return
	}
	start := time.Now()
	defer func() {
		c.m.latency.Observe(time.Since(start).Seconds())
		if p := recover(); p != nil {
			done(errExcluded)
			panic(p)
		}
		switch {
		case a.err == nil:
			done(nil)
		case r.Context().Err() != nil, x.body.Slow():
			done(errExcluded)
		default:
			done(a.err)
		}
	}()
	a.Context = r.Context()
	a.out = &x.rec
	a.reqIDHeader[0] = a.reqID
	proxy.ServeHTTP(&x.rec, r.WithContext(a))
}

// releaseShare gives the attempt's place in its workspace's share back, once.
func (a *attempt) releaseShare() {
	if a.share != nil {
		a.share.release(a.shareWS)
		a.share, a.shareWS = nil, ""
	}
}

// newProxy builds the ReverseProxy of one cell.
func (rt *Router) newProxy(c *cell) *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Transport:      c.transport,
		BufferPool:     &rt.buffers,
		Rewrite:        c.rewrite,
		ModifyResponse: c.modifyResponse,
		ErrorHandler:   c.errorHandler,
	}
}

func (c *cell) rewrite(pr *httputil.ProxyRequest) { c.rewriteTo(pr, c.target) }

// rewriteTo sends the request to target (the cell, or its preview host) with the router's
// headers.
func (c *cell) rewriteTo(pr *httputil.ProxyRequest, target *url.URL) {
	a := attemptOf(pr.In.Context())
	h := pr.Out.Header
	for _, k := range routerOnlyRequest {
		delete(h, k)
	}
	pr.SetURL(target)
	// What ProxyRequest.SetXForwarded sets (client sent X-Forwarded-* are already gone), with
	// value slices that allocate nothing: the attempt holds them. The value slices are shared,
	// not copied: nothing downstream writes into header values.
	if ip, _, err := net.SplitHostPort(pr.In.RemoteAddr); err == nil {
		a.xffHeader[0] = ip
		h["X-Forwarded-For"] = a.xffHeader[:]
	}
	a.xfhHeader[0] = pr.In.Host
	h["X-Forwarded-Host"] = a.xfhHeader[:]
	if pr.In.TLS == nil {
		h["X-Forwarded-Proto"] = protoHTTP
	} else {
		h["X-Forwarded-Proto"] = protoHTTPS
	}
	if _, ok := h["User-Agent"]; !ok {
		h["User-Agent"] = noUA // what the ReverseProxy would set, without its allocation
	}
	h[keyRequestID] = a.reqIDValue()
	if a.traceTo != "" {
		a.traceHeader[0] = a.traceTo
		h[keyTraceparent] = a.traceHeader[:]
	}
	h[keyPlacementCell] = c.idValue
	if a.workspace {
		a.epochHeader[0] = strconv.FormatInt(a.epoch, 10)
		h[keyPlacementEpoch] = a.epochHeader[:]
	}
	if a.buffered {
		delete(h, "Expect") // the canonical key: Del would canonicalise it again per request
	}
}

func (c *cell) modifyResponse(res *http.Response) error {
	a := attemptOf(res.Request.Context())
	a.releaseShare() // the cell has answered; the copy is the client's pace (try)
	if a.workspace && res.StatusCode == http.StatusMisdirectedRequest {
		a.misdirected = true
		a.owningHint = res.Header.Get(cellproto.HeaderOwningCell)
		// Read the small problem body so the connection can be reused.
		_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 64<<10))
		return errMisdirected
	}
	// The answer's headers go to the client's header map here, their value slices shared,
	// instead of copied value by value (one allocation per header) by the ReverseProxy after
	// this hook: it then finds res.Header empty. Server-sent events keep the ReverseProxy's
	// path, which reads Content-Type to flush at once, and so do upgrades (101), whose
	// headers the ReverseProxy reads after this hook.
	src, dst := res.Header, a.out.Header()
	if res.StatusCode != http.StatusSwitchingProtocols && !isEventStream(src) {
		for k, v := range src {
			if _, ok := dst[k]; ok {
				dst[k] = append(dst[k], v...)
			} else {
				dst[k] = v
			}
		}
		clear(src)
		src = dst
	}
	for _, k := range routerOnlyResponse {
		delete(src, k)
	}
	src[keyCellID] = c.idValue
	src[keyRequestID] = a.reqIDValue()
	return nil
}

// isEventStream reports a text/event-stream answer (which the ReverseProxy flushes at once).
func isEventStream(h http.Header) bool {
	ct := h["Content-Type"]
	return len(ct) > 0 && strings.HasPrefix(strings.ToLower(strings.TrimSpace(ct[0])), "text/event-stream")
}

func (c *cell) errorHandler(_ http.ResponseWriter, r *http.Request, err error) {
	a := attemptOf(r.Context())
	if !errors.Is(err, errMisdirected) {
		a.err = err
	}
}

// bufferBody reads a workspace request's body into memory when it is at most MaxRetryBody, so
// the 421 retry can send it again. It returns the request to send and whether it can be
// resent. Larger bodies stream through unbuffered: a 421 on those becomes 503
// RETRY_BODY_TOO_LARGE.
func (rt *Router) bufferBody(r *http.Request) (*http.Request, bool, error) {
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return r, true, nil
	}
	limit := rt.cfg.MaxRetryBody
	if r.ContentLength > limit {
		return r, false, nil
	}
	var buf []byte
	var err error
	if r.ContentLength > 0 {
		buf = make([]byte, r.ContentLength)
		_, err = io.ReadFull(r.Body, buf)
	} else {
		buf, err = io.ReadAll(io.LimitReader(r.Body, limit+1))
	}
	if err != nil {
		e := problem.New(problem.BadRequest, "the request body could not be read")
		e.Cause = err
		return nil, false, e
	}
	if int64(len(buf)) > limit {
		out := r.Clone(r.Context())
		out.Body = io.NopCloser(io.MultiReader(bytes.NewReader(buf), r.Body))
		return out, false, nil
	}
	out := r.WithContext(r.Context())
	out.Body = io.NopCloser(bytes.NewReader(buf))
	out.ContentLength = int64(len(buf))
	out.TransferEncoding = nil
	out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf)), nil }
	return out, true, nil
}

// rewind returns a copy of a buffered request whose body starts again from the beginning.
func rewind(r *http.Request) *http.Request {
	out := r.WithContext(r.Context())
	if r.GetBody != nil {
		out.Body, _ = r.GetBody()
	}
	return out
}

// bufferPool lends the ReverseProxy its copy buffers; without one it allocates 32 KiB per
// request. Buffers travel in *[]byte holders (a bare slice put in a sync.Pool allocates); the
// empty holders are pooled too, so lending and returning allocate nothing.
type bufferPool struct{ bufs, holders sync.Pool }

const copyBufferSize = 32 << 10

func (b *bufferPool) Get() []byte {
	h, ok := b.bufs.Get().(*[]byte)
	if !ok {
		return make([]byte, copyBufferSize)
	}
	buf := *h
	*h = nil
	b.holders.Put(h)
	return buf
}

func (b *bufferPool) Put(buf []byte) {
	if cap(buf) != copyBufferSize {
		return
	}
	h, ok := b.holders.Get().(*[]byte)
	if !ok {
		h = new([]byte)
	}
	*h = buf[:copyBufferSize]
	b.bufs.Put(h)
}
