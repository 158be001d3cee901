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
	"os"
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

// close cancels its probe in flight and drops idle connections. Requests in flight finish.
func (c *cell) close() {
	c.cancel()
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
		return // closed: do not open cells that nobody closes
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

// probeLoop probes every cell at once, now and then every ProbeInterval, until Close. A cell
// the directory lists later is first probed in the next round (it counts as healthy until then).
func (rt *Router) probeLoop() {
	rt.ProbeCells(rt.ctx)
	loop.Every(rt.ctx, rt.cfg.ProbeInterval, nil, rt.ProbeCells)
}

// probeOutcome is what one /readyz probe of one cell found.
type probeOutcome uint8

const (
	probePassed   probeOutcome = iota // a 2xx answer in time
	probeNotReady                     // another answer: the cell is reachable and says it is not ready
	probeFailed                       // an error before the timeout (refused connection, reset, bad answer)
	probeTimedOut                     // no answer within ProbeTimeout
	probeCanceled                     // the cell was closed or the round stopped: says nothing
)

// ProbeCells probes every cell's /readyz once, all at once, and updates their health. The
// background loop runs one such round every ProbeInterval; tests call this to decide when
// probing happens.
//
// ProbeFailures failed probes in a row mark a cell unhealthy (its requests then fail at once
// with 503), one passing probe marks it healthy again. Timed-out probes are discounted (not
// counted against their cells) in a round that suggests the router itself is the cause: one in
// which no cell answered at all, or one that ran late (longer than ProbeTimeout plus the larger
// of ProbeTimeout and 250 ms: the router's process or machine stalled, or its CPU is starved,
// and answers waiting in its sockets were read too late). Marking every cell down for the router's
// own stall would answer every tenant 503. At most ProbeFailures rounds in a row are
// discounted; after that the timeouts count again, so cells that really all stopped answering
// are marked down ProbeFailures rounds later than one that stopped alone. Discounted rounds
// are counted in router_probe_rounds_inconclusive_total and logged (at most once a minute).
// Other failures (a non-2xx answer, a refused connection) always count.
//
// ProbeFailures rounds in a row in which no cell answered make the router report itself unready
// (Readiness), so that a replica cut off from every cell leaves its load balancer.
func (rt *Router) ProbeCells(ctx context.Context) {
	rt.probeMu.Lock() // rounds one at a time: the streaks below are about rounds in a row
	defer rt.probeMu.Unlock()
	cells := rt.cells.Load().sorted
	if len(cells) == 0 {
		return
	}
	out := make([]probeOutcome, len(cells))
	errs := make([]error, len(cells))
	start := rt.cfg.Now()
	var wg sync.WaitGroup
	for i, c := range cells {
		wg.Go(func() { out[i], errs[i] = rt.probe(ctx, c) })
	}
	wg.Wait()
	elapsed := rt.cfg.Now().Sub(start)
	answered, timedOut, canceled := 0, 0, 0
	for _, o := range out {
		switch o {
		case probePassed, probeNotReady:
			answered++
		case probeTimedOut:
			timedOut++
		case probeCanceled:
			canceled++
		}
	}
	if canceled == len(cells) {
		return // the router or every cell closing: the round says nothing
	}
	if answered == 0 {
		if int(rt.unanswered.Add(1)) == rt.cfg.ProbeFailures {
			rt.log.Warn("no cell answered its health probe for several rounds in a row; the router reports itself unready",
				zap.Int("rounds", rt.cfg.ProbeFailures), zap.Int("cells", len(cells)), zap.Int("timed_out", timedOut))
		}
	} else if int(rt.unanswered.Swap(0)) >= rt.cfg.ProbeFailures {
		rt.log.Info("cells answer their health probes again; the router is ready")
	}
	late := elapsed > rt.cfg.ProbeTimeout+max(rt.cfg.ProbeTimeout, lateSlack)
	discount := false
	if timedOut > 0 && (answered == 0 || late) {
		rt.discounted++
		n := rt.discounted
		discount = n <= rt.cfg.ProbeFailures
		switch {
		case discount:
			rt.m.probeInconclusive.Inc()
			if now := rt.cfg.Now(); now.Sub(rt.discountLogged) >= time.Minute {
				rt.discountLogged = now
				rt.log.Warn("health probes timed out in a round that suggests the router itself is the cause; "+
					"not counting the timeouts against the cells",
					zap.Int("cells", len(cells)), zap.Int("answered", answered), zap.Int("timed_out", timedOut),
					zap.Duration("round", elapsed), zap.Duration("timeout", rt.cfg.ProbeTimeout))
			}
		case n == rt.cfg.ProbeFailures+1:
			rt.log.Warn("health probes keep timing out; counting the timeouts against the cells again",
				zap.Int("cells", len(cells)), zap.Int("answered", answered), zap.Int("timed_out", timedOut))
		}
	} else {
		rt.discounted = 0
	}
	for i, c := range cells {
		switch out[i] {
		case probePassed:
			c.probeFail.Store(0)
			if !c.healthy.Swap(true) {
				rt.log.Info("cell is healthy again", zap.String("cell", c.id))
			}
		case probeTimedOut, probeNotReady, probeFailed:
			if out[i] == probeTimedOut && discount {
				continue
			}
			if int(c.probeFail.Add(1)) >= rt.cfg.ProbeFailures && c.healthy.Swap(false) {
				rt.log.Warn("cell failed its health probes; failing its requests fast",
					zap.String("cell", c.id), zap.Error(errs[i]))
			}
		}
	}
}

// lateSlack is the least a round may take beyond ProbeTimeout before it counts as late: a
// timed-out probe ends at the transport's next deadline check (every 50 ms), plus scheduling.
const lateSlack = 250 * time.Millisecond

// probe asks c's /readyz once, within ProbeTimeout; ctx (the round's) and the cell's own
// context cancel it.
func (rt *Router) probe(ctx context.Context, c *cell) (probeOutcome, error) {
	pctx, cancel := context.WithTimeout(c.ctx, rt.cfg.ProbeTimeout)
	defer cancel()
	defer context.AfterFunc(ctx, cancel)()
	status, err := probeOnce(pctx, c)
	switch {
	case err == nil && status/100 == 2:
		return probePassed, nil
	case err == nil:
		return probeNotReady, fmt.Errorf("readyz answered %d", status)
	case c.ctx.Err() != nil || ctx.Err() != nil:
		return probeCanceled, err // closing: the failure says nothing about the cell
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) ||
		errors.Is(pctx.Err(), context.DeadlineExceeded):
		return probeTimedOut, err
	}
	return probeFailed, err
}

// probeOnce asks c's /readyz and returns the answer's status.
func probeOnce(ctx context.Context, c *cell) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.target.JoinPath("/readyz").String(), nil)
	if err != nil {
		return 0, err
	}
	res, err := c.transport.RoundTrip(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 64<<10))
	res.Body.Close()
	return res.StatusCode, nil
}

// serving reports whether the cell takes any traffic now (its own workspaces at least).
func (c *cell) serving() bool {
	st := c.State()
	return (st == CellActive || st == CellDraining) && c.healthy.Load() &&
		c.breaker.State() != gobreaker.StateOpen
}
