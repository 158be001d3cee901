package chromium

import (
	"context"
	"net/url"
	"sync"
	"sync/atomic"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// gate decides, for every request the browser makes, whether it may leave
// and whether it carries the preview credential.
type gate struct {
	allowed  map[string]bool
	docURL   *url.URL
	header   string
	token    string
	blocked  atomic.Int64
	mu       sync.Mutex
	blockLog []string
	logf     func(string, ...any)
	// traceparent, when set, goes with the credential to the document request (Job.Traceparent).
	traceparent string
}

func newGate(docURL *url.URL, allowedOrigins []string, header, token string) *gate {
	g := &gate{allowed: map[string]bool{}, docURL: docURL, header: header, token: token}
	for _, o := range allowedOrigins {
		if u, err := url.Parse(o); err == nil {
			g.allowed[origin(u)] = true
		}
	}
	g.allowed[origin(docURL)] = true
	return g
}

func origin(u *url.URL) string { return u.Scheme + "://" + hostPort(u) }

// handle answers one paused request. It runs in its own goroutine: chromedp
// listeners must not block.
func (g *gate) handle(ctx context.Context, ev *fetch.EventRequestPaused) {
	c := chromedp.FromContext(ctx)
	if c == nil || c.Target == nil {
		return
	}
	exec := cdp.WithExecutor(ctx, c.Target)
	u, err := url.Parse(ev.Request.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || !g.allowed[origin(u)] {
		g.blocked.Add(1)
		g.mu.Lock()
		if len(g.blockLog) < 20 && u != nil {
			// Origin only: paths and queries may hold tokens.
			g.blockLog = append(g.blockLog, u.Scheme+"://"+u.Host)
		}
		g.mu.Unlock()
		_ = fetch.FailRequest(ev.RequestID, network.ErrorReasonBlockedByClient).Do(exec)
		return
	}
	// The credential goes only to the document's exact origin and path.
	// A redirect produces a new paused request for the new URL, so the
	// check repeats on every hop.
	if origin(u) == origin(g.docURL) && u.EscapedPath() == g.docURL.EscapedPath() {
		headers := make([]*fetch.HeaderEntry, 0, len(ev.Request.Headers)+1)
		for k, v := range ev.Request.Headers {
			if s, ok := v.(string); ok && !equalFold(k, g.header) && !equalFold(k, traceparentHeader) {
				headers = append(headers, &fetch.HeaderEntry{Name: k, Value: s})
			}
		}
		headers = append(headers, &fetch.HeaderEntry{Name: g.header, Value: g.token})
		if g.traceparent != "" {
			headers = append(headers, &fetch.HeaderEntry{Name: traceparentHeader, Value: g.traceparent})
		}
		if err := fetch.ContinueRequest(ev.RequestID).WithHeaders(headers).Do(exec); err != nil && g.logf != nil {
			g.logf("continue with credential: %v", err)
		}
		return
	}
	_ = fetch.ContinueRequest(ev.RequestID).Do(exec)
}

// traceparentHeader is shared/tracing.Header (the child does not link the SDK).
const traceparentHeader = "traceparent"

func (g *gate) blockedOrigins() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.blockLog...)
}

func equalFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}
