// Command routerbench measures what the router adds to a request: the same small GET is sent
// at a fixed number of keep-alive connections on loopback (-connections, by default 64 and then
// 1,024: each count is a table of its own), one load after another in the same run, to
//
//   - direct: a tiny Go backend (a stand-in for a cell's GET /api/v1/system/version);
//   - router (any cell): the router, in process, in front of that backend, on a route without a
//     workspace;
//   - router (workspace): the same, on /api/v1/workspaces/{id} with the placement cached,
//     each request to the next of -workspaces (16) workspaces placed on the one cell, as many
//     tenants' requests would be (one workspace alone gets at most the router's
//     ROUTER_MAX_IN_FLIGHT_PER_WORKSPACE, 256, in flight: more is a 429);
//   - bare ReverseProxy, http.Transport: an httputil.ReverseProxy with nothing else, over the
//     standard transport: the floor for a Go proxy built the textbook way;
//   - bare ReverseProxy, router's transport: the same over the router's transport (router/hop),
//     so the router's own cost (routing, breaker, metrics, access log) shows as the difference;
//   - nginx: nginx as a reference reverse proxy with a keep-alive upstream to the same backend,
//     run with its own configuration, pid and log files in a temporary directory.
//
// It prints a markdown table per connection count (req/s, p50, p99, CPU per request of the
// proxy (with the part spent in the kernel) and of the backend, and the garbage collector's share of the in-process proxy's CPU,
// from runtime/metrics: /cpu/classes/gc/total over the CPU its Go code used, /cpu/classes/total
// minus /cpu/classes/idle)
// and the figures the router is held to (issue #23): router throughput as a fraction of nginx's
// (target ≥ 0.8× at 64 connections, ≥ 0.75× at 1,024; also per round, since a round's loads
// run seconds apart and the host is shared), the router's CPU per request against nginx's
// (target ≤ 1.5×) and the p99 the router adds over direct (target ≤ 1 ms). -only narrows the
// proxies measured; -cpuprofile writes a profile per in-process proxy. The in-process router
// is served as the router binary serves it (NewPublicServer, default
// settings).
//
// -real measures the real authenticated path instead (real.go): the local deployment of
// `make run` (PostgreSQL, directory, one cell, the router binary from -bin) with its demo data,
// and nginx in front of the same cell; wrk sends the demo token's GET /api/v1/projects through
// both, alternating, and the router's throughput ÷ nginx's is printed per round (target
// ≥ 0.9×). -router-bin adds another router binary (an older build, say) in front of the same
// cell, measured in the same rounds.
//
// The backend runs as a child process (this binary, re-executed), so that the router and the
// backend do not share a Go scheduler, as in production. Load comes from wrk when it is on PATH,
// else from a built-in closed-loop Go generator with exact percentiles. wrk always runs with a
// small script that sends each request to the next of the target's paths (formatted once per
// thread); nginx gets the workspace route's paths, so wrk does the same work for every target. Both the router and
// nginx write an access log line per request to a file, as they would in production.
//
// Each round loads the targets in the order of the round before rotated by one, so that no
// target always runs first on a host that is still warming up, or always right after the same
// neighbour.
//
// This is a measurement tool: it asserts nothing, and it must only ever listen on and send to
// 127.0.0.1.
package main
