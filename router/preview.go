package router

import (
	"context"
	"errors"
	"fmt"
	"net/http/httputil"
	"net/url"

	"github.com/sony/gobreaker/v2"
	"go.uber.org/zap"

	"slidecells/router/hop"
	"slidecells/router/placement"
	"slidecells/shared/problem"
)

// previewHost is a cell's preview host as the router reaches it: like the cell itself, with a
// transport, ReverseProxy and breaker of its own, so a dead preview host neither trips the
// cell's breaker nor takes the cell's connections.
type previewHost struct {
	rawURL    string
	target    *url.URL
	transport *hop.Transport
	proxy     *httputil.ReverseProxy
	breaker   *gobreaker.TwoStepCircuitBreaker[struct{}]
}

// checkPreviewURL accepts http(s)://host[:port] without path, query or user information: the
// router keeps preview paths unchanged, so the preview host serves them at its root.
func checkPreviewURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil || u.Fragment != "" {
		return nil, fmt.Errorf("invalid preview URL %q", raw)
	}
	u.Path = ""
	return u, nil
}

// newPreviewHost builds the preview host of cell c at raw, or returns nil when raw is empty or
// invalid (logged): the cell's preview paths then get 503 PREVIEW_UNAVAILABLE.
func (rt *Router) newPreviewHost(c *cell, raw string) *previewHost {
	if raw == "" {
		return nil
	}
	u, err := checkPreviewURL(raw)
	if err != nil {
		rt.log.Error("ignoring the preview host the directory lists", zap.String("cell", c.id), zap.Error(err))
		return nil
	}
	ph := &previewHost{rawURL: raw, target: u, transport: CellTransport(u, rt.cfg)}
	name := c.id + "/preview"
	ph.breaker = gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{
		Name:        name,
		MaxRequests: rt.cfg.BreakerHalfOpenRequests,
		Timeout:     rt.cfg.BreakerOpenTimeout,
		ReadyToTrip: func(n gobreaker.Counts) bool { return n.ConsecutiveFailures >= rt.cfg.BreakerFailures },
		IsExcluded:  func(err error) bool { return errors.Is(err, errExcluded) },
		OnStateChange: func(name string, from, to gobreaker.State) {
			rt.log.Warn("preview host breaker changed state", zap.String("cell", name),
				zap.String("from", from.String()), zap.String("to", to.String()))
		},
	})
	ph.proxy = &httputil.ReverseProxy{
		Transport:      ph.transport,
		BufferPool:     &rt.buffers,
		Rewrite:        func(pr *httputil.ProxyRequest) { c.rewritePreview(pr, ph.target) },
		ModifyResponse: c.modifyResponse,
		ErrorHandler:   c.errorHandler,
	}
	return ph
}

func (ph *previewHost) close() {
	if ph != nil {
		ph.transport.Close()
	}
}

// previewURL is the preview host's URL as the directory lists it ("" without one).
func (c *cell) previewURL() string {
	if ph := c.preview.Load(); ph != nil {
		return ph.rawURL
	}
	return ""
}

// rewritePreview is rewrite for a preview request: the same router headers, sent to the
// preview host with the path unchanged, without the client's Authorization (a PAT means
// nothing to a preview host, and must not reach it). Cookies pass unchanged: the preview host's
// own session cookie, if it sets one, must come back to it, and the API sets none.
func (c *cell) rewritePreview(pr *httputil.ProxyRequest, target *url.URL) {
	c.rewriteTo(pr, target)
	delete(pr.Out.Header, "Authorization")
}

func errNoPreviewHost() *problem.Error {
	e := problem.New(problem.PreviewUnavailable, "the workspace's preview host is unavailable; retry shortly")
	e.RetryAfter, e.Retryable = 1, true
	return e
}

// targetFor is target for a workspace route or a preview route. A preview path of a
// workspace the directory does not know goes, like its API paths, to the preview host of the
// cell chosen by the keyed hash: that host refuses it with the one answer it gives every
// refused document (no token of that workspace can verify), so a caller cannot tell an unknown
// workspace from a known one.
func (rt *Router) targetFor(ctx context.Context, ws string, p placement.Placement, err error, preview bool) (*cell, int64, *previewHost, error) {
	c, epoch, perr := rt.target(ctx, ws, p, err)
	if perr != nil || !preview {
		return c, epoch, nil, perr
	}
	ph := c.preview.Load()
	if ph == nil {
		return c, epoch, nil, errNoPreviewHost()
	}
	return c, epoch, ph, nil
}

// unavailable is the 503 the router answers for an attempt it could not make or that failed
// in transport.
func (a *attempt) unavailable(msg string) *problem.Error {
	code := problem.CellUnavailable
	if a.preview != nil {
		code, msg = problem.PreviewUnavailable, "the preview host "+msg
	} else {
		msg = "the cell " + msg
	}
	e := problem.New(code, "%s", msg)
	e.RetryAfter, e.Retryable = 1, true
	return e
}
