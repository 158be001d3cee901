package router

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sony/gobreaker/v2"
	"go.uber.org/zap"

	"slidecells/router/hop"
	"slidecells/shared/ids"
	"slidecells/shared/loop"
	"slidecells/shared/problem"
)

// CellState is a cell's state in the directory.
type CellState string

// Cell states. Only active and draining cells receive traffic.
const (
	// CellActive cells serve their workspaces and the routes without a workspace.
	CellActive CellState = "active"
	// CellDraining cells keep serving the workspaces placed on them (until those are moved
	// away) but get no new work: no routes without a workspace and no unknown workspaces.
	CellDraining CellState = "draining"
	// CellDown cells get nothing; requests for their workspaces fail with 503.
	CellDown CellState = "down"
)

// Cell is one cell as the directory lists it.
type Cell struct {
	ID    string
	URL   string // internal base URL, e.g. http://10.0.0.5:8081
	State CellState
	// PreviewURL is the base URL of the cell's preview host (http(s)://host[:port]); empty
	// when it has none.
	PreviewURL string
}

// CellSource lists the cells.
type CellSource interface {
	Cells(ctx context.Context) ([]Cell, error)
}

// cell is a cell with everything the router keeps per cell: its own transport (so a frozen
// cell's connections cannot starve another's), ReverseProxy, breaker and health.
type cell struct {
	id        string
	idValue   []string // id as a header value, shared by every request
	rawURL    string
	target    *url.URL
	state     atomic.Pointer[CellState]
	transport *hop.Transport
	proxy     *httputil.ReverseProxy
	breaker   *gobreaker.TwoStepCircuitBreaker[struct{}]
	healthy   atomic.Bool
	probeFail atomic.Int32
	inFlight  atomic.Int64 // requests sent (or being sent) to the cell or its preview host
	m         cellMetrics
	// preview is the cell's preview host; nil when it has none. Replaced when the directory
	// lists another URL for it.
	preview atomic.Pointer[previewHost]

	// ctx ends when the cell is closed; it cancels a probe in flight.
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{} // closed when the prober has exited; nil without a prober
}

func (c *cell) State() CellState { return *c.state.Load() }

// admit rejects a request at once when the cell is down or failed its health probes, without
// touching the network.
func (c *cell) admit() *problem.Error {
	if c.State() == CellDown || !c.healthy.Load() {
		e := problem.New(problem.CellUnavailable, "the cell is unavailable; retry shortly")
		e.RetryAfter, e.Retryable = 1, true
		return e
	}
	return nil
}

// takesNewWork reports whether the cell may get routes without a workspace and unknown
// workspaces: active, passing its probes, and its breaker not open.
func (c *cell) takesNewWork() bool {
	return c.State() == CellActive && c.healthy.Load() && c.breaker.State() != gobreaker.StateOpen
}

// close stops the prober and drops idle connections. Requests in flight finish.
func (c *cell) close() {
	c.cancel()
	if c.done != nil {
		<-c.done
	}
	c.transport.Close()
	c.preview.Load().close()
}

// cellSet is an immutable snapshot of the cells; requests read it without locks.
type cellSet struct {
	byID   map[string]*cell
	sorted []*cell // by ID
}

// pickAny picks a cell for a route without a workspace, round robin over the cells that take
// new work.
func (s *cellSet) pickAny(rr *atomic.Uint64) *cell {
	n := len(s.sorted)
	if n == 0 {
		return nil
	}
	start := rr.Add(1)
	for i := range n {
		c := s.sorted[(start+uint64(i))%uint64(n)]
		if c.takesNewWork() {
			return c
		}
	}
	return nil
}

// pickHashed picks the cell for a workspace the directory does not know: rendezvous hashing
// over ALL known cells, whatever their state or health. An unknown ID must meet exactly what a
// known one placed on that cell meets — the same draining cell, the same 503 from a cell that is
// down or whose breaker is open — or the answer (its X-Cell-ID, or a 503 where an unknown ID
// would get a cell's 401/404) would tell even an unauthenticated caller that a workspace exists.
// The hash is keyed (see Config.UnknownHashKey) and stable while the cell list is.
func (s *cellSet) pickHashed(ws string, key []byte) *cell {
	var best *cell
	var bestScore uint64
	mac := hmac.New(sha256.New, key)
	var sum [sha256.Size]byte
	for _, c := range s.sorted {
		mac.Reset()
		mac.Write([]byte(ws))
		mac.Write([]byte{0})
		mac.Write([]byte(c.id))
		score := binary.BigEndian.Uint64(mac.Sum(sum[:0]))
		if best == nil || score > bestScore {
			best, bestScore = c, score
		}
	}
	return best
}

// RefreshCells rereads the cell list from Config.Cells. Concurrent calls share one read. On
// failure the previous list stays in use.
func (rt *Router) RefreshCells(ctx context.Context) error {
	_, err, _ := rt.cellsSF.Do("cells", func() (any, error) {
		qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rt.lookupTimeout())
		defer cancel()
		list, err := rt.cfg.Cells.Cells(qctx)
		if err != nil {
			rt.cellsOK.Store(false)
			rt.m.directoryError("cells")
			return nil, fmt.Errorf("router: read cells: %w", err)
		}
		rt.reconcile(list)
		rt.cellsOK.Store(true)
		return nil, nil
	})
	return err
}

func (rt *Router) lookupTimeout() time.Duration {
	if rt.cfg.Cache.LookupTimeout > 0 {
		return rt.cfg.Cache.LookupTimeout
	}
	return 2 * time.Second
}

// reconcile replaces the cell set with list, keeping the transport, breaker and health of
// every cell whose URL did not change.
func (rt *Router) reconcile(list []Cell) {
	rt.cellsMu.Lock()
	defer rt.cellsMu.Unlock()
	if rt.ctx.Err() != nil {
		return // closed: do not start probers that nobody stops
	}
	old := rt.cells.Load()
	next := &cellSet{byID: make(map[string]*cell, len(list))}
	for _, lc := range list {
		st, err := checkCell(lc)
		if err != nil {
			rt.log.Error("ignoring a cell the directory lists", zap.String("cell", lc.ID), zap.Error(err))
			continue
		}
		if _, dup := next.byID[lc.ID]; dup {
			continue
		}
		c := old.byID[lc.ID]
		if c == nil || c.rawURL != lc.URL {
			c = rt.newCell(lc)
			rt.log.Info("cell added", zap.String("cell", lc.ID), zap.String("state", string(st)))
		} else {
			if c.State() != st {
				rt.log.Info("cell state changed", zap.String("cell", lc.ID),
					zap.String("from", string(c.State())), zap.String("to", string(st)))
			}
			if c.previewURL() != lc.PreviewURL {
				rt.log.Info("cell preview host changed", zap.String("cell", lc.ID))
				c.preview.Swap(rt.newPreviewHost(c, lc.PreviewURL)).close()
			}
		}
		c.state.Store(&st)
		next.byID[lc.ID] = c
		next.sorted = append(next.sorted, c)
	}
	sort.Slice(next.sorted, func(i, j int) bool { return next.sorted[i].id < next.sorted[j].id })
	rt.cells.Store(next)
	for id, c := range old.byID {
		if next.byID[id] != c {
			rt.log.Info("cell removed or replaced", zap.String("cell", id))
			c.close()
			rt.m.forgetCell(id)
		}
	}
	for _, c := range next.sorted {
		if old.byID[c.id] != c {
			rt.startProber(c)
		}
	}
}

func checkCell(c Cell) (CellState, error) {
	if !ids.CellIDValid(c.ID) {
		return "", errors.New("invalid cell ID")
	}
	u, err := url.Parse(c.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("invalid internal URL %q", c.URL)
	}
	switch c.State {
	case CellActive, CellDraining, CellDown:
		return c.State, nil
	}
	return "", fmt.Errorf("unknown state %q", c.State)
}

func (rt *Router) newCell(lc Cell) *cell {
	u, _ := url.Parse(lc.URL) // checked by checkCell
	c := &cell{id: lc.ID, idValue: []string{lc.ID}, rawURL: lc.URL, target: u}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.transport = CellTransport(u, rt.cfg)
	c.healthy.Store(true) // optimistic until the first probe says otherwise
	c.breaker = gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{
		Name:        lc.ID,
		MaxRequests: rt.cfg.BreakerHalfOpenRequests,
		Timeout:     rt.cfg.BreakerOpenTimeout,
		ReadyToTrip: func(n gobreaker.Counts) bool { return n.ConsecutiveFailures >= rt.cfg.BreakerFailures },
		IsExcluded:  func(err error) bool { return errors.Is(err, errExcluded) },
		OnStateChange: func(name string, from, to gobreaker.State) {
			rt.log.Warn("cell breaker changed state", zap.String("cell", name),
				zap.String("from", from.String()), zap.String("to", to.String()))
		},
	})
	c.proxy = rt.newProxy(c)
	c.m = rt.m.forCell(lc.ID)
	c.preview.Store(rt.newPreviewHost(c, lc.PreviewURL))
	return c
}

// CellTransport builds the transport the router uses for the cell at u (an http or https URL
// with a host): the lean keep-alive client of package hop for bodiless idempotent requests
// (most of the traffic), over an http.Transport for the rest, with cfg's timeouts and pool
// size (defaults for zero values). Exported so benchmarks can put the router's transport
// under a bare ReverseProxy.
func CellTransport(u *url.URL, cfg Config) *hop.Transport {
	cfg = cfg.withDefaults()
	fallback := &http.Transport{
		Proxy: nil, // cells are internal; never go through an environment proxy
		DialContext: (&net.Dialer{
			Timeout:   cfg.DialTimeout,
			KeepAlive: 30 * time.Second,
		}).DialContext,
		ForceAttemptHTTP2:     false,
		MaxIdleConns:          0,
		MaxIdleConnsPerHost:   cfg.MaxIdleConnsPerCell,
		IdleConnTimeout:       cellIdleTimeout,
		TLSHandshakeTimeout:   5 * time.Second,
		ResponseHeaderTimeout: cfg.CellTimeout,
		ExpectContinueTimeout: time.Second,
		// Pass the cell's encoding through untouched instead of negotiating gzip on the hop.
		DisableCompression: true,
	}
	addr := u.Host
	if u.Port() == "" {
		port := "80"
		if u.Scheme == "https" {
			port = "443"
		}
		addr = net.JoinHostPort(u.Hostname(), port)
	}
	t, err := hop.New(hop.Config{
		Addr:                  addr,
		DialTimeout:           cfg.DialTimeout,
		MaxIdle:               cfg.MaxIdleConnsPerCell,
		IdleTimeout:           cellIdleTimeout,
		ResponseHeaderTimeout: cfg.CellTimeout,
		Fallback:              fallback,
	})
	if err != nil {
		panic(err) // only a missing fallback or an address without a port fails, and neither can
	}
	return t
}

// cellIdleTimeout closes keep-alive connections to a cell idle for longer; it is below the
// cells' own idle timeout (120 s) so that a cell rarely closes a connection the router pools.
const cellIdleTimeout = 90 * time.Second

func (rt *Router) refreshLoop() {
	loop.Every(rt.ctx, rt.cfg.CellsRefresh, nil, func(ctx context.Context) {
		if err := rt.RefreshCells(ctx); err != nil {
			rt.log.Warn("cannot reread the cell list; keeping the last one", zap.Error(err))
		}
	})
}

// startProber starts the /readyz prober of a new cell.
func (rt *Router) startProber(c *cell) {
	if rt.cfg.ProbeInterval < 0 {
		return
	}
	c.done = make(chan struct{})
	go func() {
		defer close(c.done)
		rt.probeCtx(c.ctx, c)
		loop.Every(c.ctx, rt.cfg.ProbeInterval, nil, func(ctx context.Context) { rt.probeCtx(ctx, c) })
	}()
}

// ProbeCells probes every cell's /readyz once, now, and updates their health. The background
// probers do the same every ProbeInterval; tests call this to decide when probing happens.
func (rt *Router) ProbeCells(ctx context.Context) {
	var wg sync.WaitGroup
	for _, c := range rt.cells.Load().sorted {
		wg.Go(func() { rt.probeCtx(ctx, c) })
	}
	wg.Wait()
}

func (rt *Router) probeCtx(ctx context.Context, c *cell) {
	ctx, cancel := context.WithTimeout(ctx, rt.cfg.ProbeTimeout)
	defer cancel()
	err := probeOnce(ctx, c)
	if err == nil {
		c.probeFail.Store(0)
		if !c.healthy.Swap(true) {
			rt.log.Info("cell is healthy again", zap.String("cell", c.id))
		}
		return
	}
	if c.ctx.Err() != nil {
		return // closing: the failure says nothing about the cell
	}
	if int(c.probeFail.Add(1)) >= rt.cfg.ProbeFailures && c.healthy.Swap(false) {
		rt.log.Warn("cell failed its health probes; failing its requests fast",
			zap.String("cell", c.id), zap.Error(err))
	}
}

func probeOnce(ctx context.Context, c *cell) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.target.JoinPath("/readyz").String(), nil)
	if err != nil {
		return err
	}
	res, err := c.transport.RoundTrip(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 64<<10))
	res.Body.Close()
	if res.StatusCode/100 != 2 {
		return fmt.Errorf("readyz answered %d", res.StatusCode)
	}
	return nil
}

// serving reports whether the cell takes any traffic now (its own workspaces at least).
func (c *cell) serving() bool {
	st := c.State()
	return (st == CellActive || st == CellDraining) && c.healthy.Load() &&
		c.breaker.State() != gobreaker.StateOpen
}
