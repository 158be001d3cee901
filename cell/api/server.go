package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humago"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"gocloud.dev/blob"

	"slidecells/cell"
	"slidecells/cell/auth"
	"slidecells/cell/authoring"
	cblob "slidecells/cell/blob"
	"slidecells/cell/idempotency"
	"slidecells/cell/jobs"
	"slidecells/cell/ratelimit"
	"slidecells/cell/render"
	"slidecells/cell/store"
	"slidecells/cell/tenancy"
	"slidecells/shared/cellproto"
	"slidecells/shared/db"
	"slidecells/shared/directory"
	"slidecells/shared/httpserve"
	"slidecells/shared/ids"
	"slidecells/shared/problem"
	"slidecells/shared/tracing"
)

// Version is the service version reported by /api/v1/system/version (set at build time).
var Version = "dev"

// Health reports the state of one dependency.
type Health struct {
	Status string `json:"status" enum:"ok,degraded,unavailable"`
	Detail string `json:"detail,omitempty"`
}

// RenderHealth reports render capability; nil means no renderer is configured.
type RenderHealth func(ctx context.Context) Health

// Server is one cell's API.
type Server struct {
	CellID    string
	API       huma.API
	Mux       *http.ServeMux
	Auth      *auth.Authenticator
	Guard     *tenancy.Guard
	Dir       *directory.Cached
	DB        *db.DB
	Log       *zap.Logger
	Render    RenderHealth
	Blobs     *blob.Bucket
	StartedAt time.Time

	Idem *idempotency.Store
	// Limiter refuses requests over their address's failed authentications, their token's or
	// (for members) their workspace's rate, before any cell database work.
	Limiter *ratelimit.Limiter
	// Jobs is the cell's mutation-job queue; Workers runs it.
	Jobs *jobs.Queue
	// Authoring creates and edits page and component source through jobs.
	Authoring *authoring.Service

	jobCap int
	// trustedProxies: see Config.TrustedProxies.
	trustedProxies []netip.Prefix
	ops            []Operation
	byPattern      map[string]Operation
	openAPI30      openAPI30
	// jsonBody: the operations that take a JSON body (see edgeCheck); names: their name
	// fields (textrules.go).
	jsonBody map[string]bool
	names    nameFieldIndex
	metrics  *metrics
	// benchWithoutIdempotency: see Config.BenchWithoutIdempotency.
	benchWithoutIdempotency bool
}

// Config is what New needs.
type Config struct {
	CellID string
	DB     *db.DB
	Dir    *directory.Cached
	Log    *zap.Logger
	// Services are the cell's services (cell.New), which the API serves. Without them the
	// operations are declared (the OpenAPI document, the operation list) but cannot run.
	Services *cell.Services
	// Renderer is the cell's render coordinator, for render health and its metrics; nil when no
	// renderer is configured (render health is then unavailable).
	Renderer *render.Coordinator
	// Collectors are further metrics of the cell's background work (the render retention).
	Collectors []prometheus.Collector
	// Blobs is the cell's blob store (fileblob locally, s3blob in production).
	Blobs *blob.Bucket
	// RateWorkspace and RateToken are the default request rate limits per workspace and per
	// token (ratelimit); a Rate of 0 is no limit. Workspaces' overrides come from Dir.
	RateWorkspace, RateToken ratelimit.Limit
	// RateAuthFailures bounds failed authentications per client address (CELL_RATE_AUTH_FAILURES);
	// over it, requests from that address whose credential has not authenticated recently get
	// 429 from memory. The zero Limit is off.
	RateAuthFailures ratelimit.Limit
	// TrustedProxies are the peers whose X-Forwarded-For names the client address (the router's
	// networks, CELL_TRUSTED_PROXIES); from any other peer the connection's address is the
	// client's. Nil trusts none.
	TrustedProxies []netip.Prefix
	// JobWorkspaceConcurrency bounds the mutation jobs of one workspace running at once (0: no
	// bound); workspaces' overrides come from Dir.
	JobWorkspaceConcurrency int
	// BenchWithoutIdempotency runs Idempotency-Key operations without the idempotency layer
	// (keys ignored, no exactly-once): only for the benchmark that measures what the layer
	// costs. cell/cmd/cell accepts it only for cells whose ID starts with "bench-".
	BenchWithoutIdempotency bool
	// PreviewBackend, when set, serves the preview host's interface under /internal/preview/v1/
	// (cell/preview.NewBackend; it checks the preview service credential itself).
	PreviewBackend http.Handler
}

// New builds the API over the cell's services with every operation registered.
func New(c Config) *Server {
	svc := c.Services
	if svc == nil {
		svc = &cell.Services{Store: &store.Store{}, Blobs: &cblob.Store{}, Idem: &idempotency.Store{}, Jobs: &jobs.Queue{},
			Authoring: &authoring.Service{}}
	}
	mux := http.NewServeMux()
	hc := huma.DefaultConfig("Presentation platform API", "1.0.0")
	hc.OpenAPIPath = "/openapi"
	hc.DocsPath = ""
	hc.SchemasPath = ""
	hc.CreateHooks = nil // no $schema links in bodies
	hc.Components.Schemas = huma.NewMapRegistry("#/components/schemas/", schemaName)
	hc.Components.SecuritySchemes = map[string]*huma.SecurityScheme{
		"bearer": {Type: "http", Scheme: "bearer", Description: "Personal access token, prefix svc_pat_"},
	}
	hc.Servers = []*huma.Server{{URL: "/", Description: "the public host: the router, which sends each workspace's calls to its cell"}}
	hc.Info.Description = "Public API v1. Every path starts with /api/v1; errors are RFC 9457 problem JSON with code, message and trace_id."
	s := &Server{
		CellID: c.CellID, Mux: mux, DB: c.DB, Dir: c.Dir, Log: c.Log, Render: coordinatorHealth(c.Renderer), Blobs: c.Blobs,
		Auth:      &auth.Authenticator{Dir: c.Dir},
		Guard:     &tenancy.Guard{DB: c.DB, CellID: c.CellID, Dir: c.Dir},
		StartedAt: time.Now(),
		Idem:      svc.Idem,
		Jobs:      svc.Jobs,
		Authoring: svc.Authoring,
		byPattern: map[string]Operation{},
		jsonBody:  map[string]bool{},
		metrics:   newMetrics(c.DB),

		benchWithoutIdempotency: c.BenchWithoutIdempotency,
		jobCap:                  c.JobWorkspaceConcurrency,
	}
	s.Limiter = &ratelimit.Limiter{Workspace: c.RateWorkspace, Token: c.RateToken, Address: c.RateAuthFailures}
	s.trustedProxies = c.TrustedProxies
	if c.Dir != nil {
		s.Limiter.Overrides = c.Dir
	}
	s.Idem.Observe = s.metrics.idempotencyOutcome
	if c.Renderer != nil {
		s.metrics.reg.MustRegister(c.Renderer.Collectors()...)
	}
	s.metrics.reg.MustRegister(c.Collectors...)
	if c.DB != nil {
		c.DB.OnRetry = s.metrics.txRetry
	}
	s.openAPI30.api = func() huma.API { return s.API }
	s.API = humago.New(opMux{s}, hc)
	if c.PreviewBackend != nil {
		mux.Handle("/internal/preview/v1/", c.PreviewBackend)
	}
	s.registerSystem()
	s.registerIdentity()
	s.registerCapabilities()
	s.registerStandards()
	st := svc.Store
	s.registerProjects(st)
	s.registerAssets(st)
	s.registerDesign(st)
	s.registerProjectStructure(st)
	s.registerAI(st)
	s.registerJobs(s.Jobs, s.Authoring)
	s.registerPages(st, s.Authoring)
	s.registerComponents(st, s.Authoring)
	s.registerValidation(st, s.Authoring)
	s.registerPreview(s.Authoring)
	if c.DB != nil {
		s.metrics.reg.MustRegister(s.Jobs.Collector(), s.Idem.Collector(), s.Guard.Collector())
	}
	if c.Dir != nil && c.Dir.Dir != nil {
		s.metrics.reg.MustRegister(c.Dir.Dir.MovesCollector(c.CellID))
	}
	return s
}

// Workers returns the pool that runs this cell's mutation jobs (start it with Run): slots jobs
// at once under leases of lease (0: jobs.DefaultLease), each committed under its owner's current
// permission.
func (s *Server) Workers(slots int, lease time.Duration) *jobs.Pool {
	p := &jobs.Pool{Queue: s.Jobs, Handlers: s.Authoring.Handlers(), Slots: slots, Lease: lease, Log: s.Log,
		Observe: s.metrics.jobState, WorkspaceConcurrency: s.jobCap, Authorize: authoring.JobAuthorizer(s.Auth)}
	if s.Dir != nil {
		p.WorkspaceOverrides = s.Dir.JobConcurrency
	}
	return p
}

// schemaName names component schemas as huma does, except a page of items: Page[FooView]'s
// body is FooListBody (FooCount's too).
func schemaName(t reflect.Type, hint string) string {
	if item, ok := strings.CutPrefix(hint, "Page["); ok && strings.HasSuffix(item, "]Body") {
		item = strings.TrimSuffix(item, "]Body")
		item = strings.TrimSuffix(item[strings.LastIndex(item, ".")+1:], "View")
		return strings.TrimSuffix(item, "Count") + "ListBody"
	}
	return huma.DefaultSchemaNamer(t, hint)
}

type ctxKey int

const (
	traceKey ctxKey = iota
	principalKey
	scopeKey
)

// TraceID returns the request's trace ID.
func TraceID(ctx context.Context) string {
	s, _ := ctx.Value(traceKey).(string)
	return s
}

// PrincipalFrom returns the authenticated caller.
func PrincipalFrom(ctx context.Context) auth.Principal {
	p, _ := ctx.Value(principalKey).(auth.Principal)
	return p
}

// ScopeFrom returns the authorized workspace scope. Only InWorkspace operations have one.
func ScopeFrom(ctx context.Context) auth.Scope {
	s, _ := ctx.Value(scopeKey).(auth.Scope)
	return s
}

// traceIDOf is the request's trace ID: that of the trace accessLog put the request under
// (startSpan), or, outside it, the X-Request-ID under the request-ID rule.
func traceIDOf(r *http.Request) string {
	if id := tracing.TraceID(r.Context()); id != "" {
		return id
	}
	return cellproto.RequestID(r.Header.Get(cellproto.HeaderRequestID))
}

// authorize resolves the workspace, checks membership, the tenancy guard and scopes, in that
// order: a non-member learns nothing about placement or scopes.
func (s *Server) authorize(ctx context.Context, r *http.Request, op Operation, p auth.Principal) (auth.Scope, error) {
	ws := r.PathValue("workspace_id")
	header := r.Header.Get(cellproto.HeaderWorkspaceID)
	if ws == "" {
		// X-Workspace-ID is the default for paths that name no workspace; a path's workspace
		// wins over it.
		ws = header
	}
	if ws == "" {
		return auth.Scope{}, problem.New(problem.WorkspaceRequired, "this operation needs a workspace: send X-Workspace-ID")
	}
	if !ids.Valid(ids.Workspace, ws) {
		e := problem.New(problem.WorkspaceIDInvalid, "the workspace ID is malformed")
		field := "path.workspace_id"
		if r.PathValue("workspace_id") == "" {
			field = "header." + cellproto.HeaderWorkspaceID
		}
		e.Fields = []problem.FieldError{{Field: field, Message: "expected " + ids.Pattern(ids.Workspace)}}
		return auth.Scope{}, e
	}
	scope, err := s.Auth.Authorize(ctx, p, ws)
	if err != nil {
		return scope, err
	}
	// Only members spend the workspace's share (the answer above came from the directory
	// cache; the guard below is the first cell database work).
	if err := s.Limiter.AllowWorkspace(ctx, ws); err != nil {
		return scope, err
	}
	epoch, _ := strconv.ParseInt(r.Header.Get(cellproto.HeaderPlacementEpoch), 10, 64)
	if err := s.Guard.Check(ctx, ws, epoch, !op.ReadOnly); err != nil {
		return scope, err
	}
	return scope, op.Allows(scope)
}

// Handler returns the cell's whole HTTP handler: the API, /livez, /readyz, and problem JSON
// for unknown paths (404), known paths with another method (405 with Allow) and the planned
// OAuth endpoints (OAUTH_NOT_ENABLED).
func (s *Server) Handler() http.Handler {
	outer := http.NewServeMux()
	outer.HandleFunc("GET /livez", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	outer.HandleFunc("GET /readyz", s.readyz)
	outer.Handle("GET /metrics", s.metrics.handler())
	outer.Handle("/", s.accessLog(func(w http.ResponseWriter, r *http.Request) {
		if _, pattern := s.Mux.Handler(r); pattern != "" {
			s.Mux.ServeHTTP(w, r)
			return
		}
		ctx := context.WithValue(r.Context(), traceKey, traceIDOf(r))
		w.Header().Set(cellproto.HeaderRequestID, TraceID(ctx))
		var pe *problem.Error
		switch allow := s.allowed(r); {
		case r.URL.Path == "/.well-known/oauth-authorization-server" || strings.HasPrefix(r.URL.Path, "/oauth/"):
			pe = problem.ErrOAuthNotEnabled()
		case len(allow) > 0:
			pe = problem.ErrMethodNotAllowed(allow)
		default:
			pe = problem.ErrNotFound()
		}
		s.fail(ctx, w, pe)
	}))
	return outer
}

// allowed lists the methods the API routes at r's path.
func (s *Server) allowed(r *http.Request) []string {
	var out []string
	for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pattern := s.Mux.Handler(probe); pattern != "" {
			out = append(out, m)
		}
	}
	return out
}

// accessLog writes one line per request and records its metrics (the pipeline names the
// operation and the error code through the request's outcome): never the query string (it may hold signed values) nor
// any header but the workspace and trace IDs.
func (s *Server) accessLog(next http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		ctx, out := withOutcome(r.Context())
		ctx, span := s.startSpan(ctx, r)
		r = r.WithContext(ctx)
		sw := &httpserve.StatusWriter{ResponseWriter: w}
		next(sw, r)
		status := sw.Status()
		if clientGone(r) {
			status, out.code = problem.StatusClientClosed, problem.ClientClosedRequest
		}
		defer func() { s.metrics.observe(out.op, status, out.code, time.Since(start)) }()
		ws := r.PathValue("workspace_id")
		if ws == "" {
			ws = r.Header.Get(cellproto.HeaderWorkspaceID)
		}
		if !ids.Valid(ids.Workspace, ws) {
			ws = ""
		}
		s.endSpan(span, out, status, ws)
		s.Log.Info("request", zap.String("method", r.Method), zap.String("path", r.URL.Path),
			zap.Int("status", status), zap.String("workspace_id", ws),
			zap.String("trace_id", w.Header().Get(cellproto.HeaderRequestID)),
			zap.Duration("duration", time.Since(start)))
	})
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if err := s.DB.Ping(ctx); err != nil { // its own connection: not queued behind requests
		http.Error(w, "database unavailable", http.StatusServiceUnavailable)
		return
	}
	_, _ = fmt.Fprintln(w, "ok")
}

// RenderOwnerPermitted is the render coordinator's dispatch-time permission recheck
// (render.Coordinator.Permitted): a validation's owner is "validation:<user>", and a member
// removed since it was queued does not get it dispatched. Other owners (jobs, screenshots) are
// cancelled by their own business actions.
func RenderOwnerPermitted(dir *directory.Cached) func(ctx context.Context, ws, owner string) (bool, error) {
	return func(ctx context.Context, ws, owner string) (bool, error) {
		user, ok := strings.CutPrefix(owner, "validation:")
		if !ok {
			return true, nil
		}
		if _, err := dir.Role(ctx, ws, user); err != nil {
			if errors.Is(err, directory.ErrNotFound) {
				return false, nil
			}
			return true, err
		}
		return true, nil
	}
}
