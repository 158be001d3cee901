// Command router runs the public edge of the deployment: it reads its settings from the
// environment (router/README.md lists them), connects to the directory database, and serves
// the public API by proxying each request to the cell that hosts its workspace.
//
// It stays thin: parse the configuration, build a router.Router over the directory, serve,
// and on SIGTERM or SIGINT stop accepting, let requests in flight finish (for up to
// ROUTER_SHUTDOWN_TIMEOUT) and close. A bad setting stops it at start with a message naming
// the setting and exit status 2.
package main
