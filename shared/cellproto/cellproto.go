// Package cellproto is the HTTP protocol between the router and the cells: the names of the
// headers they exchange and the request-ID rule both apply. The router and the cell import
// it; neither declares these names itself.
//
// Headers, by who may set them:
//
//   - The router only (removed from every client request before the router sets its own, so no
//     client can pose as the router): X-Placement-Epoch, X-Placement-Cell and X-Request-ID to
//     the cell; X-Cell-ID to the client.
//   - The cell only: X-Owning-Cell, the hint on a 421 answer (the router reads it and never
//     passes it on to clients).
//   - Clients: X-Workspace-ID, which names the workspace of a route whose path does not.
package cellproto

import "slidecells/shared/ids"

// Header names as documented. http.Header's methods canonicalise them ("X-Request-Id"); code
// that indexes a header map directly must use http.CanonicalHeaderKey of them.
const (
	// HeaderPlacementEpoch is the placement epoch the router routed with ("0" for a workspace
	// it does not know; absent on routes without a workspace).
	HeaderPlacementEpoch = "X-Placement-Epoch"
	// HeaderPlacementCell is the cell the router means to reach.
	HeaderPlacementCell = "X-Placement-Cell"
	// HeaderOwningCell is the cell that owns a workspace, sent by a cell with its 421.
	HeaderOwningCell = "X-Owning-Cell"
	// HeaderCellID names the cell that answered (or that the router tried last), to clients.
	HeaderCellID = "X-Cell-ID"
	// HeaderRequestID carries the request ID: the request's W3C trace ID, set by the router
	// (shared/tracing); it is the trace_id of logs and problem bodies and is on every answer.
	// RequestID is the rule for values outside a trace.
	HeaderRequestID = "X-Request-ID"
	// HeaderWorkspaceID names the workspace when the path does not.
	HeaderWorkspaceID = "X-Workspace-ID"
)

// MaxRequestIDLength bounds a request ID taken from a caller.
const MaxRequestIDLength = 64

// RequestID is the rule for a request ID, applied by the router to what a client sends and by
// the cell to what reaches it: a caller's value v is kept when it is 1 to 64 characters of
// [A-Za-z0-9._-] and does not contain "svc_" in any case (the prefix of our tokens: a confused
// client might send one as its request ID, and every log line would then carry it). Otherwise
// (absent, too long, other characters, token-like) it returns a new ID, "req_" plus 128 random
// bits. A kept value cannot smuggle anything into logs or headers.
func RequestID(v string) string {
	if ValidRequestID(v) {
		return v
	}
	return ids.New(ids.Request)
}

// ValidRequestID reports whether RequestID keeps v.
func ValidRequestID(v string) bool {
	if len(v) == 0 || len(v) > MaxRequestIDLength {
		return false
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
		if c == '_' && i >= 3 && (v[i-3]|0x20) == 's' && (v[i-2]|0x20) == 'v' && (v[i-1]|0x20) == 'c' {
			return false
		}
	}
	return true
}
