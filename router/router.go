package router

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"os"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
	"golang.org/x/sync/singleflight"

	"slidecells/router/h1"
	"slidecells/router/placement"
	"slidecells/shared/cellproto"
	"slidecells/shared/httpserve"
	"slidecells/shared/logging"
	"slidecells/shared/problem"
)

// Defaults of Config.
const (
	DefaultCellTimeout             = 30 * time.Second
	DefaultDialTimeout             = time.Second
	DefaultMaxIdleConnsPerCell     = DefaultMaxInFlightPerCell
	DefaultBreakerFailures         = 5
	DefaultBreakerOpenTimeout      = 5 * time.Second
	DefaultBreakerHalfOpenRequests = 1
	DefaultProbeInterval           = time.Second
	DefaultProbeTimeout            = 500 * time.Millisecond
	DefaultProbeFailures           = 2
	DefaultCellsRefresh            = 10 * time.Second
	DefaultMaxRetryBody            = 1 << 20
	DefaultMaxInFlightPerCell      = 1024
	DefaultMaxInFlightPerWorkspace = DefaultMaxInFlightPerCell / 4
)

// Config configures a Router. Zero values take the Default… constants; Placements and Cells
// are required.
type Config struct {
	// Placements is the authority on workspace → cell (the directory).
	Placements placement.Source
	// Cells lists the cells (the directory). It is read at start and every CellsRefresh; the
	// last list that could be read stays in use while the source fails.
	Cells CellSource
	// Cache tunes the placement cache (TTL, MaxStale, NegativeTTL, …). Its Now is replaced by
	// Config.Now when that is set.
	Cache placement.Config

	// CellTimeout is how long a cell may take to send response headers before the request
	// fails with 503 CELL_UNAVAILABLE and counts against the cell's breaker.
	CellTimeout time.Duration
	// DialTimeout bounds connecting to a cell.
	DialTimeout time.Duration
	// MaxIdleConnsPerCell is the keep-alive pool per cell; it must cover the expected number of
	// concurrent requests to one cell, or connections churn under load (every request beyond
	// the pool dials, and a surge of dials meets the cell's accept queue and DialTimeout). Its
	// default is MaxInFlightPerCell's, so below the in-flight bound nothing churns.
	MaxIdleConnsPerCell int

	// BreakerFailures consecutive transport failures (refused, reset, timeout) open a cell's
	// breaker. A cell's own 4xx/5xx answers are not failures.
	BreakerFailures uint32
	// BreakerOpenTimeout is how long an open breaker fails requests at once before letting
	// BreakerHalfOpenRequests trial requests through.
	BreakerOpenTimeout      time.Duration
	BreakerHalfOpenRequests uint32

	// ProbeInterval is how often every cell's /readyz is probed (all cells at once, a round);
	// negative disables probing (all cells count as healthy, which tests use). ProbeFailures
	// consecutive failed probes mark a cell unhealthy; one success marks it healthy again. The
	// timeouts of a round that points at the router itself (no cell answered, or the round ran
	// late) are discounted for at most ProbeFailures rounds in a row (ProbeCells).
	ProbeInterval time.Duration
	ProbeTimeout  time.Duration
	ProbeFailures int

	// CellsRefresh is how often the cell list is reread; negative disables the periodic reread
	// (RefreshCells still works).
	CellsRefresh time.Duration

	// MaxRetryBody is the largest request body buffered so that it can be resent after a 421.
	MaxRetryBody int64

	// MaxInFlightPerCell bounds the requests this router has in flight to one cell (its API and
	// its preview host together). Beyond it a request is shed at once with 503 CELL_OVERLOADED
	// and Retry-After: 1, without touching the cell, and counted in router_shed_total: a cell
	// that slows down gets a bounded queue, not every client's connection.
	MaxInFlightPerCell int
	// MaxInFlightPerWorkspace bounds one workspace's share of that: beyond it the workspace's
	// next request is refused at once with 429 RATE_LIMITED, Retry-After: 1 and
	// X-RateLimit-Scope: workspace, without touching the cell, and counted in
	// router_workspace_shed_total. One tenant that floods its cell with slow requests (long
	// screenshots) thus cannot fill the cell's bound and leave the cell's other tenants with
	// 503. Only the time at the cell counts, from sending the request to the start of the
	// cell's answer (not the time a body takes to arrive, nor the time the client takes to
	// read the answer: both are the client's pace), so a stranger who names someone else's
	// workspace cannot hold its share: the cell refuses them, or answers a public route, at
	// once.
	MaxInFlightPerWorkspace int

	// BodyTimeout and BodyMinRate bound how long a client may take to send a request body:
	// its n-th byte must arrive within BodyTimeout + n/BodyMinRate (bytes per second) of the
	// request's start, or the request ends with 408 and the connection is closed. A client
	// that declares a body and holds it back thus holds its connection for about BodyTimeout.
	BodyTimeout time.Duration
	BodyMinRate int64

	// UnknownHashKey keys the hash that picks the cell for workspaces the directory does not
	// know. Give every replica the same secret key: with an unkeyed hash, anyone who knows the
	// cell list could compare X-Cell-ID with the hash and learn that a workspace exists.
	UnknownHashKey []byte

	// Logger receives events; nil discards them.
	Logger *zap.Logger
	// AccessLog receives one line per request (logging.NewWithAccess, which writes the
	// Logger's JSON format to its output for a fraction of zap's CPU); nil writes none.
	AccessLog *logging.AccessLog
	// Now is the router's clock for the placement cache and for timing the rounds of health
	// probes (ProbeCells); nil is time.Now.
	Now func() time.Time
}

func (c Config) withDefaults() Config {
	if c.CellTimeout <= 0 {
		c.CellTimeout = DefaultCellTimeout
	}
	if c.DialTimeout <= 0 {
		c.DialTimeout = DefaultDialTimeout
	}
	if c.MaxIdleConnsPerCell <= 0 {
		c.MaxIdleConnsPerCell = DefaultMaxIdleConnsPerCell
	}
	if c.BreakerFailures == 0 {
		c.BreakerFailures = DefaultBreakerFailures
	}
	if c.BreakerOpenTimeout <= 0 {
		c.BreakerOpenTimeout = DefaultBreakerOpenTimeout
	}
	if c.BreakerHalfOpenRequests == 0 {
		c.BreakerHalfOpenRequests = DefaultBreakerHalfOpenRequests
	}
	if c.ProbeInterval == 0 {
		c.ProbeInterval = DefaultProbeInterval
	}
	if c.ProbeTimeout <= 0 {
		c.ProbeTimeout = DefaultProbeTimeout
	}
	if c.ProbeFailures <= 0 {
		c.ProbeFailures = DefaultProbeFailures
	}
	if c.CellsRefresh == 0 {
		c.CellsRefresh = DefaultCellsRefresh
	}
	if c.MaxRetryBody <= 0 {
		c.MaxRetryBody = DefaultMaxRetryBody
	}
	if c.MaxInFlightPerCell <= 0 {
		c.MaxInFlightPerCell = DefaultMaxInFlightPerCell
	}
	if c.MaxInFlightPerWorkspace <= 0 {
		c.MaxInFlightPerWorkspace = DefaultMaxInFlightPerWorkspace
	}
	if c.BodyTimeout <= 0 {
		c.BodyTimeout = DefaultBodyTimeout
	}
	if c.BodyMinRate <= 0 {
		c.BodyMinRate = DefaultBodyMinRate
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Cache.Now == nil {
		c.Cache.Now = c.Now
	}
	return c
}

// Validate reports configuration that cannot work.
func (c Config) Validate() error {
	if c.Placements == nil {
		return errors.New("router: Config.Placements is required")
	}
	if c.Cells == nil {
		return errors.New("router: Config.Cells is required")
	}
	return c.Cache.Validate()
}

// Router is the public edge: it maps each request to a workspace, the workspace to a cell, and
// proxies. It is an http.Handler for the public routes; OpsHandler serves /livez, /readyz and
// /metrics, on a listener of their own (never the public one).
type Router struct {
	cfg   Config
	log   *zap.Logger
	cache *placement.Cache
	m     *metrics

	cells     atomic.Pointer[cellSet]
	cellsMu   sync.Mutex // serialises reconciling the cell set, never held by requests
	cellsSF   singleflight.Group
	cellsOK   atomic.Bool  // the last cell list read succeeded
	lastForce atomic.Int64 // unix nanos of the last on-demand cell reread
	// The health probes' rounds (ProbeCells): probeMu runs them one at a time; unanswered
	// counts the rounds in a row in which no cell answered (at ProbeFailures the router reports
	// itself unready), discounted those in a row whose timeouts suggested the router's own
	// stall, discountLogged when that was last logged.
	probeMu        sync.Mutex
	unanswered     atomic.Int32 // read by Readiness
	discounted     int          // under probeMu, as discountLogged
	discountLogged time.Time
	rr             atomic.Uint64
	buffers        bufferPool
	share          *workspaceShare           // requests in flight per workspace (MaxInFlightPerWorkspace)
	public         atomic.Pointer[h1.Server] // the public listener's server, for /metrics (ObservePublic)

	ctx       context.Context // ends at Close: the background work's
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once
}

// New builds a Router, reads the cell list once (a failure is logged and retried in the
// background, and /readyz reports it), and starts the cell refresher and the health probes. Call
// Close to stop them.
func New(ctx context.Context, cfg Config) (*Router, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	cache, err := placement.New(cfg.Placements, cfg.Cache)
	if err != nil {
		return nil, err
	}
	rt := &Router{cfg: cfg, log: cfg.Logger, cache: cache, share: newWorkspaceShare()}
	rt.ctx, rt.cancel = context.WithCancel(context.Background())
	rt.cells.Store(&cellSet{byID: map[string]*cell{}})
	rt.m = newMetrics(rt)
	if err := rt.RefreshCells(ctx); err != nil {
		rt.log.Warn("cannot read the cell list at start; retrying in the background", zap.Error(err))
	}
	if cfg.CellsRefresh > 0 {
		rt.wg.Go(rt.refreshLoop)
	}
	if cfg.ProbeInterval > 0 {
		rt.wg.Go(rt.probeLoop)
	}
	return rt, nil
}

// Close stops the background work and closes idle connections to the cells. In-flight
// requests are not interrupted.
func (rt *Router) Close() {
	rt.closeOnce.Do(func() {
		rt.cancel()
		rt.cellsMu.Lock()
		for _, c := range rt.cells.Load().sorted {
			c.close()
		}
		rt.cellsMu.Unlock()
		rt.wg.Wait()
	})
}

// Handler serves the public routes only: /livez, /readyz and /metrics are not among them (404
// like every unknown path); serve OpsHandler on an internal listener.
func (rt *Router) Handler() http.Handler { return rt }

// ServeHTTP routes one public request. Every answer carries X-Request-ID and X-Cell-ID.
func (rt *Router) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	x := &exchange{rec: recorder{ResponseWriter: w}, r: r}
	x.startTrace()
	x.body = rt.guardBody(w, r)
	// Deferred so that an aborted copy (the ReverseProxy panics with http.ErrAbortHandler when a
	// response breaks mid-body) is still logged and counted.
	defer rt.finish(x, start)
	rt.serve(x)
}

// exchange is the state of one client request across its attempts.
type exchange struct {
	rec   recorder
	r     *http.Request
	reqID string     // the trace ID in hex: X-Request-ID to the cell and the client, trace_id of logs
	trace string     // the traceparent to send to the cell, or ""
	span  trace.Span // the router's span; nil while tracing is off
	ws    string
	cell  *cell                // the last cell tried; nil while none was
	body  *httpserve.BodyGuard // the request body's rate rule; nil without a body
	first attempt              // the first attempt, allocated with the exchange
}

// cellID is the ID of the last cell tried, or "" before the router picked one.
func (x *exchange) cellID() string {
	if x.cell == nil {
		return ""
	}
	return x.cell.id
}

func (rt *Router) serve(x *exchange) {
	rte, err := classify(x.r)
	if err != nil {
		rt.fail(x, err)
		return
	}
	cells := rt.cells.Load()
	if rte.kind == toAnyCell {
		c := cells.pickAny(&rt.rr)
		if c == nil {
			rt.fail(x, errNoHealthyCell())
			return
		}
		x.cell = c
		a := &x.first
		a.cell, a.reqID, a.traceTo = c, x.reqID, x.trace
		rt.try(x, x.r, a)
		rt.finishAttempt(x, a)
		return
	}

	x.ws = rte.ws
	preview := rte.kind == toPreview
	ctx := x.r.Context()
	p, outcome, err := rt.cache.Lookup(ctx, x.ws)
	rt.m.cache(outcome, err)
	c, epoch, ph, perr := rt.targetFor(ctx, x.ws, p, err, preview)
	if c != nil {
		x.cell = c
	}
	if perr != nil {
		rt.fail(x, perr)
		return
	}

	out, replayable, err := rt.bufferBody(x.r)
	if replayable && x.body != nil {
		x.body.Release() // all of it is in memory
	}
	if err != nil {
		if x.body.Slow() {
			err = errBodyTimeout(err)
		}
		rt.fail(x, err)
		return
	}
	a := &x.first
	a.cell, a.reqID, a.traceTo, a.epoch, a.workspace, a.buffered, a.preview = c, x.reqID, x.trace, epoch, true, replayable, ph
	rt.try(x, out, a)
	if !a.misdirected {
		rt.finishAttempt(x, a)
		return
	}

	// The cell does not host the workspace at the epoch we sent: our placement is stale (a move,
	// or a cell that forgot a workspace). Look again and retry once.
	rt.log.Info("misdirected; looking the placement up again",
		zap.String("trace_id", x.reqID), zap.String("workspace_id", x.ws), zap.String("cell", c.id),
		zap.Int64("epoch", epoch), zap.String("owning_cell_hint", a.owningHint))
	if !replayable {
		rt.cache.Invalidate(x.ws)
		rt.m.misdirect("body_too_large")
		e := problem.New(problem.RetryBodyTooLarge,
			"the workspace moved while the request was sent and its body is too large to resend; send it again")
		e.RetryAfter, e.Retryable = 1, true
		rt.fail(x, e)
		return
	}
	p, err = rt.cache.Refresh(ctx, x.ws)
	c, epoch, ph, perr = rt.targetFor(ctx, x.ws, p, err, preview)
	if c != nil {
		x.cell = c
	}
	if perr != nil {
		rt.m.misdirect("lookup_failed")
		rt.fail(x, perr)
		return
	}
	a = &attempt{cell: c, reqID: x.reqID, traceTo: x.trace, epoch: epoch, workspace: true, buffered: true, preview: ph}
	rt.try(x, rewind(out), a)
	if !a.misdirected {
		rt.m.misdirect("retried")
		rt.finishAttempt(x, a)
		return
	}
	rt.m.misdirect("misdirected_twice")
	rt.cache.Invalidate(x.ws)
	e := problem.New(problem.ServiceUnavailable, "the workspace is being moved; retry shortly")
	e.RetryAfter, e.Retryable = 1, true
	rt.fail(x, e)
}

// target turns a placement lookup into the cell to try and the epoch to send.
//
// A workspace the directory does not know is NOT answered here: the router's own 404 would
// differ from a cell's answer for a workspace the caller is not a member of, and would tell
// even an unauthenticated caller which workspace IDs exist. The request goes, with epoch 0, to
// the cell picked by a keyed hash of the workspace ID, through the same admission and breaker
// as a known workspace; the cell authenticates the caller and answers exactly as for a
// non-member.
func (rt *Router) target(ctx context.Context, ws string, p placement.Placement, err error) (*cell, int64, error) {
	switch {
	case errors.Is(err, placement.ErrNotFound):
		c := rt.cells.Load().pickHashed(ws, rt.cfg.UnknownHashKey)
		if c == nil {
			return nil, 0, errNoHealthyCell()
		}
		return c, 0, nil
	case err != nil:
		rt.log.Warn("placement lookup failed", zap.String("workspace_id", ws), zap.Error(err))
		e := problem.New(problem.DirectoryUnavailable, "the workspace directory is unavailable; retry shortly")
		e.RetryAfter, e.Retryable, e.Cause = 1, true, err
		return nil, 0, e
	}
	c := rt.cellByID(ctx, p.CellID)
	if c == nil {
		rt.log.Error("placement names a cell this router does not know",
			zap.String("workspace_id", ws), zap.String("cell", p.CellID))
		e := problem.New(problem.CellUnavailable, "the workspace's cell is unavailable; retry shortly")
		e.RetryAfter, e.Retryable = 1, true
		return nil, 0, e
	}
	return c, p.Epoch, nil
}

// cellByID finds a cell, rereading the cell list (at most once a second) when a placement
// names a cell added since the last read.
func (rt *Router) cellByID(ctx context.Context, id string) *cell {
	if c := rt.cells.Load().byID[id]; c != nil {
		return c
	}
	now := time.Now().UnixNano()
	last := rt.lastForce.Load()
	if now-last < int64(time.Second) || !rt.lastForce.CompareAndSwap(last, now) {
		return nil
	}
	if err := rt.RefreshCells(ctx); err != nil {
		return nil
	}
	return rt.cells.Load().byID[id]
}

func errNoHealthyCell() *problem.Error {
	e := problem.New(problem.CellUnavailable, "no cell is available; retry shortly")
	e.RetryAfter, e.Retryable = 1, true
	return e
}

// finishAttempt answers the client after an attempt that was not a 421: the cell's answer was
// already copied, or the router answers for the failure.
func (rt *Router) finishAttempt(x *exchange, a *attempt) {
	switch {
	case a.rejected != nil:
		rt.fail(x, a.rejected)
	case a.err != nil && x.body.Slow():
		// The client sent its body too slowly: its fault, not the cell's.
		rt.fail(x, errBodyTimeout(a.err))
	case a.err != nil:
		if x.r.Context().Err() != nil {
			// The client went away; nobody reads an answer. 499 is what the access log shows.
			x.rec.WriteHeader(statusClientClosed)
			return
		}
		rt.log.Warn("cell request failed", zap.String("trace_id", x.reqID), zap.String("cell", a.cell.id),
			zap.String("workspace_id", x.ws), zap.Bool("preview", a.preview != nil), zap.Error(a.err))
		e := a.unavailable("did not answer; retry shortly")
		e.Retryable = false
		rt.fail(x, e)
	}
}

// errBodyTimeout answers a request whose body did not arrive in time (Config.BodyTimeout,
// BodyMinRate).
func errBodyTimeout(cause error) *problem.Error {
	e := problem.New(problem.BadRequest, "the request body was not received in time")
	e.Status, e.Cause = http.StatusRequestTimeout, cause
	e.Header = http.Header{"Connection": {"close"}}
	return e
}

// statusClientClosed is logged when the client disconnected before the cell answered.
const statusClientClosed = 499

// fail writes a problem answered by the router itself. X-Cell-ID names the cell the router
// tried last, or is empty when it had not picked one.
func (rt *Router) fail(x *exchange, err error) {
	if x.rec.wrote {
		return
	}
	h := x.rec.Header()
	h.Set(cellproto.HeaderRequestID, x.reqID)
	h.Set(cellproto.HeaderCellID, x.cellID())
	problem.Write(&x.rec, err, x.reqID)
}

// finish logs and counts one request.
func (rt *Router) finish(x *exchange, start time.Time) {
	end := time.Now()
	d := end.Sub(start)
	status := x.rec.status
	if status == 0 {
		status = http.StatusOK
	}
	rt.m.request(x.cell, status)
	// Nil-safe: without an access log this writes nothing.
	rt.cfg.AccessLog.BeginAt("request", end).
		Str("method", x.r.Method).
		Str("path", x.r.URL.Path).
		Int("status", int64(status)).
		Str("cell", x.cellID()).
		Str("workspace_id", x.ws).
		Str("trace_id", x.reqID).
		Dur("duration", d).
		End()
	if x.span != nil {
		x.endSpan(status)
	}
}

// recorder remembers the status for the access log and whether anything was written, so the
// router never writes a second answer.
type recorder struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (r *recorder) WriteHeader(code int) {
	if !r.wrote && code >= 200 {
		r.status, r.wrote = code, true
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if !r.wrote {
		r.status, r.wrote = http.StatusOK, true
	}
	return r.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController (used by the ReverseProxy to flush and hijack) reach the
// server's writer.
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// DefaultGCPercent is the garbage collector target the router runs with unless GOGC is set.
// The router's heap is small and short-lived (per-request buffers, a bounded placement cache),
// so collecting less often trades a few MiB of memory for ~12 % less CPU per proxied request
// (BenchmarkRouter, GOGC 100 against 400).
const DefaultGCPercent = 400

// DefaultMemoryLimitRatio is the share of the container's memory limit (cgroup v2 memory.max,
// v1 memory.limit_in_bytes, read by github.com/KimMachineGun/automemlimit) that the router sets
// as its soft memory limit (the Go runtime's GOMEMLIMIT) unless GOMEMLIMIT is set. The rest is
// headroom for what the limit does not count and the container's limit does: the binary's own
// pages (about 13 MiB), the placement table, which lives outside the Go heap (about 73 bytes
// per cached placement, 7 MiB for 100,000), and the kernel's socket buffers. A process without
// a memory limit gets no soft limit: the heap grows to GOGC's target, which the live heap sets
// (a few MiB idle; more with many connections open, each holding buffers and a hop
// connection). AUTOMEMLIMIT (a ratio in (0,1], or "off") overrides the ratio.
//
// A fixed limit replaced here (28 MiB) kept a router with 100,000 cached placements at 43 MiB
// of RSS, but starved it under many connections: the collector ran continuously once the live
// heap neared the limit (BENCHMARKS.md, "Router under 1,024 connections").
const DefaultMemoryLimitRatio = 0.8

// MemoryLimit says which soft memory limit TuneRuntime chose and why.
type MemoryLimit struct {
	// Bytes is the soft limit in force; math.MaxInt64 is none.
	Bytes int64
	// Source is "GOMEMLIMIT" (the operator's), "AUTOMEMLIMIT=off", "cgroup" (the container's
	// limit times the ratio) or "none" (no container limit, or it could not be read: Err).
	Source string
	Err    error
}

// TuneRuntime applies DefaultGCPercent unless GOGC is set, and a soft memory limit derived from
// the container's memory limit (DefaultMemoryLimitRatio) unless GOMEMLIMIT is set.
func TuneRuntime() MemoryLimit { return tuneRuntime(memlimit.FromCgroup) }

func tuneRuntime(provider memlimit.Provider) MemoryLimit {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(DefaultGCPercent)
	}
	// Empty counts as unset, as for the Go runtime itself.
	if os.Getenv("GOMEMLIMIT") != "" {
		return MemoryLimit{Bytes: debug.SetMemoryLimit(-1), Source: "GOMEMLIMIT"}
	}
	ratio := DefaultMemoryLimitRatio
	switch v := os.Getenv("AUTOMEMLIMIT"); v {
	case "":
	case "off":
		return MemoryLimit{Bytes: debug.SetMemoryLimit(-1), Source: "AUTOMEMLIMIT=off"}
	default:
		r, err := strconv.ParseFloat(v, 64)
		if err != nil || math.IsNaN(r) || r <= 0 || r > 1 {
			debug.SetMemoryLimit(math.MaxInt64)
			return MemoryLimit{Bytes: math.MaxInt64, Source: "none", Err: fmt.Errorf("AUTOMEMLIMIT=%q is not a ratio in (0,1] or off", v)}
		}
		ratio = r
	}
	n, err := memlimit.ApplyRatio(provider, ratio)()
	switch {
	case errors.Is(err, memlimit.ErrNoLimit), errors.Is(err, memlimit.ErrNoCgroup):
		err = nil
		n = math.MaxInt64
	case err != nil:
		// Unreadable cgroup files: run without a soft limit rather than with a guess.
		n = math.MaxInt64
	}
	if n == 0 || n > math.MaxInt64 {
		n = math.MaxInt64
	}
	debug.SetMemoryLimit(int64(n))
	if n == math.MaxInt64 {
		return MemoryLimit{Bytes: math.MaxInt64, Source: "none", Err: err}
	}
	return MemoryLimit{Bytes: int64(n), Source: "cgroup"}
}
