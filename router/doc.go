// Package router is the public edge of a cell-based deployment: it maps each request to a
// workspace, the workspace to the cell that hosts it, and proxies the request there. It holds
// no business rules and never answers for a cell: authentication, membership and every 404 of
// the API are the cells' business.
//
// # Routing
//
// The workspace comes from /api/v1/workspaces/{id}[/…], from /workspaces/{id}/… (the
// editor-facing font endpoints) or, for paths that name none, from the X-Workspace-ID header
// (the path wins over it). A malformed ID is 422 WORKSPACE_ID_INVALID; several X-Workspace-ID
// headers that name different workspaces are 422 WORKSPACE_ID_CONFLICT. A request that names a
// workspace goes to that workspace's cell, whatever the public route.
//
// Routes without a workspace go to any cell that takes new work (round robin): /api/v1/workspaces
// (any method: a cell answers 405 to the ones it lacks), /api/v1/auth/…, /api/v1/system/…,
// /api/v1/standards/…, /api/v1/runtime-kit[/…], /api/v1/fonts[/…], /openapi.json,
// /ai/agent-catalog[/…], and the OAuth endpoints /.well-known/oauth-authorization-server and
// /oauth/… (a cell answers OAUTH_NOT_ENABLED). Every other /api/v1/… path, /workspaces/… and
// /ai/agent-configs[/…] without a workspace is 422 WORKSPACE_REQUIRED. The legacy prefix /api/external/… is 404 NOT_FOUND, as is every other
// path, and every path with empty or dot segments (so the router and a cell can never disagree
// about which route a path is). In particular /internal/… (the service APIs of renderers,
// preview hosts and cells) is never forwarded anywhere: it is not a public route.
//
// # Preview paths
//
// /preview/w/{ws}[/…] is the public form of a preview host's documents. It goes, with the path
// and query unchanged, to the preview host of the cell that hosts {ws} (the directory's
// cells.preview_url), never to the cell's API; X-Workspace-ID is not read. The request loses
// its Authorization header (a PAT means nothing to a preview host and must not reach one);
// Cookie passes unchanged (the preview host's session, if it sets one; the API sets no
// cookies). The router headers are the same as for the cell, and a 421 from the preview host
// is handled like a cell's. Each preview host has its own transport and breaker, like its
// cell, so a dead preview host fails only the preview paths (503 PREVIEW_UNAVAILABLE). A
// workspace the directory does not know is the router's own 404 NOT_FOUND, the body of every
// other 404; a cell without a preview host is 503 PREVIEW_UNAVAILABLE; a cell marked down is
// 503 CELL_UNAVAILABLE. The cell API's health probes do not gate previews: the preview host is
// a process of its own.
//
// # Unknown workspaces
//
// A workspace the directory does not know is not answered by the router: its own 404 would
// differ from a cell's answer to a caller who is not a member, and would tell anyone, even
// without a token, which workspace IDs exist. Such a request goes to one cell that takes new
// work, chosen by rendezvous hashing of the workspace ID under a key (Config.UnknownHashKey),
// with X-Placement-Epoch: 0. The cell authenticates the caller and answers as it does for a
// non-member. The hash is keyed because every answer names its cell in X-Cell-ID: with a public
// hash, comparing X-Cell-ID with the hash's choice would reveal that a workspace exists.
//
// # Headers
//
// To the cell: X-Placement-Epoch (the placement's epoch, "0" for an unknown workspace; absent on
// routes without a workspace), X-Placement-Cell (the cell the router means to reach),
// X-Request-ID, and X-Forwarded-For/-Host/-Proto from the client connection. X-Placement-Epoch,
// X-Placement-Cell, X-Owning-Cell, X-Cell-ID, X-Request-ID, Forwarded, X-Forwarded-* and
// X-Real-IP sent by clients are dropped first, so no client can pose as the router; the router
// does not sit behind a trusted proxy whose X-Forwarded-For it would keep. The header names
// live in shared/cellproto, which the cell uses too.
//
// The request ID is the request's W3C trace ID (shared/tracing, docs/tracing.md): that of a
// client's valid traceparent, else a client's X-Request-ID when it is a trace ID (32
// lower-case hex digits, not all zero), else a new one. It is the X-Request-ID to the cell and
// to the client and the trace_id of logs and problem bodies. A client's traceparent and
// tracestate are dropped like the router-only headers; the router sends its own traceparent
// (the client's span, or the router's span when spans are exported, as the parent). With
// spans off this costs no context and no SDK call on the request path.
//
// To the client: every answer carries X-Request-ID and X-Cell-ID. X-Cell-ID is the cell that
// answered; when the router answers itself it is the cell it tried last, or empty when it had
// not picked one yet (400s, 404s, directory unavailable). X-Owning-Cell and X-Placement-* from
// cells are not passed on.
//
// # Placements and the 421 protocol
//
// Placements come from a placement.Cache (fresh for TTL, served stale for up to MaxStale while
// the directory fails, negative entries for NegativeTTL). A cell that does not host the
// workspace at the epoch sent answers 421 WORKSPACE_MISDIRECTED with an X-Owning-Cell hint. The
// router intercepts the 421 before anything reaches the client (ModifyResponse), drops the
// cache entry, reads the placement from the directory again and retries once, on the cell the
// directory names now. Request bodies up to MaxRetryBody (1 MiB) are held in memory for that
// retry; a larger body that meets a 421 gets 503 RETRY_BODY_TOO_LARGE with Retry-After, and a
// second 421 gets 503 SERVICE_UNAVAILABLE with Retry-After: 1 (the workspace is moving). The
// hint is logged, never trusted: only the directory places workspaces.
//
// # Failures
//
// Each cell has its own transport, ReverseProxy and breaker; nothing on the request
// path takes a lock shared between cells, so a cell that is down or frozen costs only its own
// requests. The transport is package hop's: a keep-alive HTTP/1.1 client that sends bodiless,
// idempotent requests (most of the traffic) on the caller's goroutine, over an http.Transport
// for everything else (bodies, upgrades); it cuts the router's CPU per request by a third
// (BENCHMARKS.md). Transport failures (refused, reset, no headers within CellTimeout) are breaker
// failures; a cell's own answers, whatever their status, are not. All cells' /readyz are probed
// at once, a round every ProbeInterval; the timeouts of a round in which no cell answered, or
// that ran late, are discounted for a few rounds (the router itself is the likelier cause, and
// marking every cell down would answer every tenant 503; ProbeCells). An open breaker, a cell that
// failed ProbeFailures consecutive /readyz probes, and a cell the directory marks down all give
// 503 CELL_UNAVAILABLE at once, without touching the network. Draining cells keep serving the
// workspaces placed on them but get no routes without a workspace. Unknown workspaces hash
// over all cells, whatever their state, so their answers look like a known workspace's.
// The cell list is reread every CellsRefresh; when the directory fails the last list stays.
//
// Operator endpoints (/livez, /readyz, /metrics) are described on OpsHandler; they are served
// on an internal listener only, never on the public one (Handler answers 404 for them).
//
// # Slow and idle clients
//
// The public listener (NewPublicServer) is served by router/h1: its own HTTP/1.1 loop for plain
// requests (HTTP/1.1, origin-form target, one Host, no Transfer-Encoding, Upgrade or Expect, a
// head within 4 KiB; nearly all of the traffic), net/http's server for every other connection,
// handed over with the bytes already read. Its connections read and write with raw system
// calls (router/internal/rawio, quietConn). It bounds what one client can hold:
// headers within ReadHeaderTimeout, idle keep-alive connections closed after IdleTimeout (both
// enforced by a sweep every 200 ms on the loop's connections, so up to 400 ms late), a client
// that stops reading its answer disconnected after SendTimeout (one write not taken), at
// most MaxConns open connections. A request body must keep pace (Config.BodyTimeout,
// BodyMinRate): the router moves the connection's read deadline forward as bytes arrive, and a
// body that falls behind ends the request with 408 and closes the connection. Such a cut is
// the client's doing and never counts against a cell's breaker.
package router
