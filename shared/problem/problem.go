// Package problem is the one error model of every HTTP service here: an Error carries a stable
// code, a displayable message and, for validation failures, field details. Codes map to HTTP
// statuses in exactly one table (Status), and Write renders RFC 9457 problem JSON.
//
// The internal cause of an error is for logs only; it never reaches a response body.
package problem

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// Code is a stable, documented error code. Clients branch on codes, never on messages.
type Code string

// The public error codes. The catalogue with meanings lives in docs/errors.md.
const (
	BadRequest             Code = "BAD_REQUEST"
	WorkspaceIDInvalid     Code = "WORKSPACE_ID_INVALID"
	WorkspaceIDConflict    Code = "WORKSPACE_ID_CONFLICT"
	WorkspaceRequired      Code = "WORKSPACE_REQUIRED"
	IdempotencyKeyRequired Code = "IDEMPOTENCY_KEY_REQUIRED"
	IdempotencyKeyInvalid  Code = "IDEMPOTENCY_KEY_INVALID"
	Unauthenticated        Code = "UNAUTHENTICATED"
	ScopeRequired          Code = "SCOPE_REQUIRED"
	Forbidden              Code = "FORBIDDEN"
	NotFound               Code = "NOT_FOUND"
	MethodNotAllowed       Code = "METHOD_NOT_ALLOWED"
	VersionConflict        Code = "VERSION_CONFLICT"
	IdempotencyKeyReused   Code = "IDEMPOTENCY_KEY_REUSED"
	IdempotencyKeyInFlight Code = "IDEMPOTENCY_KEY_IN_FLIGHT"
	StateConflict          Code = "STATE_CONFLICT"
	NameConflict           Code = "NAME_CONFLICT"
	PayloadTooLarge        Code = "PAYLOAD_TOO_LARGE"
	UnsupportedMediaType   Code = "UNSUPPORTED_MEDIA_TYPE"
	ValidationFailed       Code = "VALIDATION_FAILED"
	WorkspaceMisdirected   Code = "WORKSPACE_MISDIRECTED"
	RateLimited            Code = "RATE_LIMITED"
	Internal               Code = "INTERNAL"
	CellUnavailable        Code = "CELL_UNAVAILABLE"
	PreviewUnavailable     Code = "PREVIEW_UNAVAILABLE"
	DirectoryUnavailable   Code = "DIRECTORY_UNAVAILABLE"
	RetryBodyTooLarge      Code = "RETRY_BODY_TOO_LARGE"
	ServiceUnavailable     Code = "SERVICE_UNAVAILABLE"
	// CellOverloaded: the router already has its bound of requests in flight to the
	// workspace's cell (ROUTER_MAX_IN_FLIGHT_PER_CELL) and sheds this one; retry after
	// Retry-After.
	CellOverloaded  Code = "CELL_OVERLOADED"
	OAuthNotEnabled Code = "OAUTH_NOT_ENABLED"

	// Render codes the public API answers with (render-execution.md, "Errors"); the render
	// subsystem's other codes stay inside job summaries and validation results.
	RenderQueueFull            Code = "RENDER_QUEUE_FULL"
	RenderServiceUnavailable   Code = "RENDER_SERVICE_UNAVAILABLE"
	RenderDeadlineExceeded     Code = "RENDER_DEADLINE_EXCEEDED"
	RenderContentError         Code = "RENDER_CONTENT_ERROR"
	RenderInputNotReproducible Code = "RENDER_INPUT_NOT_REPRODUCIBLE"
	RenderCancelled            Code = "RENDER_CANCELLED"
	RenderFailed               Code = "RENDER_FAILED"
	// WorkspaceMoving: the workspace is being moved to another cell and takes no writes for a
	// few seconds (reads go on); retry after Retry-After with the same Idempotency-Key.
	WorkspaceMoving Code = "WORKSPACE_MOVING"
	// ClientClosedRequest is what logs and metrics show for a request whose client went away
	// before the answer (nginx's 499); no client ever reads it.
	ClientClosedRequest Code = "CLIENT_CLOSED_REQUEST"
)

// StatusClientClosed is the status logged for ClientClosedRequest.
const StatusClientClosed = 499

// The request-header errors (workspace, idempotency key) are request-schema errors: 422, as
// the specification's error catalogue names them (it has no 400), with their own codes and the
// header as the field; BAD_REQUEST stays 400 for a body that could not be read at all.
var statuses = map[Code]int{
	BadRequest:             http.StatusBadRequest,
	WorkspaceIDInvalid:     http.StatusUnprocessableEntity,
	WorkspaceIDConflict:    http.StatusUnprocessableEntity,
	WorkspaceRequired:      http.StatusUnprocessableEntity,
	IdempotencyKeyRequired: http.StatusUnprocessableEntity,
	IdempotencyKeyInvalid:  http.StatusUnprocessableEntity,
	Unauthenticated:        http.StatusUnauthorized,
	ScopeRequired:          http.StatusForbidden,
	Forbidden:              http.StatusForbidden,
	NotFound:               http.StatusNotFound,
	MethodNotAllowed:       http.StatusMethodNotAllowed,
	VersionConflict:        http.StatusConflict,
	IdempotencyKeyReused:   http.StatusConflict,
	IdempotencyKeyInFlight: http.StatusConflict,
	StateConflict:          http.StatusConflict,
	NameConflict:           http.StatusConflict,
	PayloadTooLarge:        http.StatusRequestEntityTooLarge,
	UnsupportedMediaType:   http.StatusUnsupportedMediaType,
	ValidationFailed:       http.StatusUnprocessableEntity,
	WorkspaceMisdirected:   http.StatusMisdirectedRequest,
	RateLimited:            http.StatusTooManyRequests,
	Internal:               http.StatusInternalServerError,
	CellUnavailable:        http.StatusServiceUnavailable,
	PreviewUnavailable:     http.StatusServiceUnavailable,
	DirectoryUnavailable:   http.StatusServiceUnavailable,
	RetryBodyTooLarge:      http.StatusServiceUnavailable,
	ServiceUnavailable:     http.StatusServiceUnavailable,
	CellOverloaded:         http.StatusServiceUnavailable,
	WorkspaceMoving:        http.StatusServiceUnavailable,
	OAuthNotEnabled:        http.StatusNotFound,

	RenderQueueFull:            http.StatusTooManyRequests,
	RenderServiceUnavailable:   http.StatusServiceUnavailable,
	RenderDeadlineExceeded:     http.StatusGatewayTimeout,
	RenderContentError:         http.StatusUnprocessableEntity,
	RenderInputNotReproducible: http.StatusUnprocessableEntity,
	RenderCancelled:            http.StatusConflict,
	RenderFailed:               http.StatusBadGateway,
	ClientClosedRequest:        StatusClientClosed,
}

// retryAfter is the one Retry-After policy of the cell's shared errors: New gives an error of
// these codes the header (seconds) and the retryable marker. Other services set their own.
var retryAfter = map[Code]int{
	DirectoryUnavailable:     2,
	IdempotencyKeyInFlight:   1,
	RenderQueueFull:          2,
	RenderServiceUnavailable: 5,
	WorkspaceMoving:          1,
}

// headerFields name the request header a request-header error is about: its field in errors[]
// when the error names none itself.
var headerFields = map[Code]string{
	WorkspaceIDConflict:    "header.X-Workspace-ID",
	WorkspaceRequired:      "header.X-Workspace-ID",
	IdempotencyKeyRequired: "header.Idempotency-Key",
	IdempotencyKeyInvalid:  "header.Idempotency-Key",
}

// Status returns the HTTP status of a code; unknown codes are 500.
func Status(c Code) int {
	if s, ok := statuses[c]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// FieldError names one invalid input: a JSON-pointer-like path and what is wrong with it.
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// Error is a failure with a public code and message. Cause is internal.
type Error struct {
	Code       Code
	Message    string
	Fields     []FieldError
	RetryAfter int // seconds; 0 means no Retry-After header
	Retryable  bool
	Header     http.Header // extra answer headers, e.g. an owner hint on a 421
	// Status, when not 0, overrides Status(Code): for an HTTP framework's own statuses that no
	// code names (a request body that timed out is a 408 BAD_REQUEST).
	Status int
	Cause  error
}

func (e *Error) Error() string {
	if e.Cause != nil {
		return fmt.Sprintf("%s: %s: %v", e.Code, e.Message, e.Cause)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

func (e *Error) Unwrap() error { return e.Cause }

// New returns an Error with a code and message.
func New(c Code, format string, args ...any) *Error {
	e := &Error{Code: c, Message: fmt.Sprintf(format, args...)}
	if s, ok := retryAfter[c]; ok {
		e.RetryAfter, e.Retryable = s, true
	}
	return e
}

// Wrap returns an internal error whose cause is logged but never shown.
// A context cancellation (the client went away) becomes ClientClosedRequest instead.
func Wrap(err error, msg string) *Error {
	if errors.Is(err, context.Canceled) {
		return &Error{Code: ClientClosedRequest, Message: "the client closed the request", Cause: err}
	}
	return &Error{Code: Internal, Message: msg, Cause: err}
}

// Invalid returns a 422 with field details.
func Invalid(fields ...FieldError) *Error {
	return &Error{Code: ValidationFailed, Message: "the request is not valid", Fields: fields}
}

// ErrNotFound is the one answer for an object that is absent, archived, or outside the caller's
// reach: the same body whichever it is, so no caller can probe for existence.
func ErrNotFound() *Error { return New(NotFound, "the requested resource does not exist") }

// ErrDirectoryUnavailable is the one answer when the directory cannot be read and no cached
// answer may serve: 503, retryable, Retry-After from the policy.
func ErrDirectoryUnavailable(cause error) *Error {
	e := New(DirectoryUnavailable, "the directory is unavailable; retry shortly")
	e.Cause = cause
	return e
}

// ErrVersionConflict is the one answer to a stale optimistic-lock baseline: what changed, and
// its current baseline (named by column, e.g. version or sha256).
func ErrVersionConflict(what, column string, current any) *Error {
	return New(VersionConflict, "the %s changed since it was read (current %s %v); re-read before deciding", what, column, current)
}

// ErrOAuthNotEnabled answers the OAuth endpoints the specification plans: sign-in by OAuth is
// not enabled on this service; personal access tokens are the credential.
func ErrOAuthNotEnabled() *Error {
	return New(OAuthNotEnabled, "OAuth sign-in is not enabled on this service; authenticate with a personal access token (Authorization: Bearer svc_pat_…)")
}

// ErrMethodNotAllowed answers a known path called with a method it does not have.
func ErrMethodNotAllowed(allow []string) *Error {
	e := New(MethodNotAllowed, "this path accepts %s", strings.Join(allow, ", "))
	e.Header = http.Header{"Allow": []string{strings.Join(allow, ", ")}}
	return e
}

// HeaderRateLimitScope names, on a 429 RATE_LIMITED, the limit that refused the request:
// workspace, token or address (a cell's request rates), workspace too for a workspace over its
// share of its cell's requests in flight (the router).
const HeaderRateLimitScope = "X-RateLimit-Scope"

// ErrRateLimited answers a request over the limit of scope, to be retried after retryAfter
// seconds (kept within 1–3600).
func ErrRateLimited(scope string, retryAfter int, format string, args ...any) *Error {
	e := New(RateLimited, format, args...)
	e.RetryAfter, e.Retryable = max(1, min(retryAfter, 3600)), true
	e.Header = http.Header{}
	e.Header.Set(HeaderRateLimitScope, scope)
	return e
}

// As extracts an *Error; anything else becomes an internal error.
func As(err error) *Error {
	var pe *Error
	if errors.As(err, &pe) {
		return pe
	}
	return Wrap(err, "internal error")
}

// Body is the JSON shape of an error answer (RFC 9457 with our extension members).
type Body struct {
	Type      string       `json:"type"`
	Title     string       `json:"title"`
	Status    int          `json:"status"`
	Code      Code         `json:"code"`
	Message   string       `json:"message"`
	TraceID   string       `json:"trace_id"`
	Retryable bool         `json:"retryable,omitempty"`
	Errors    []FieldError `json:"errors,omitempty"`
}

// ContentType is the media type of problem answers.
const ContentType = "application/problem+json"

// BodyOf renders err as the answer body for a trace ID.
func BodyOf(err error, traceID string) Body {
	pe := As(err)
	st := Status(pe.Code)
	if pe.Status != 0 {
		st = pe.Status
	}
	fields := pe.Fields
	if f, ok := headerFields[pe.Code]; ok && len(fields) == 0 {
		fields = []FieldError{{Field: f, Message: pe.Message}}
	}
	return Body{Type: "about:blank", Title: http.StatusText(st), Status: st, Code: pe.Code,
		Message: pe.Message, TraceID: traceID, Retryable: pe.Retryable, Errors: fields}
}

// Headers are the headers of err's answer: no caching, Retry-After when it has one, and its
// extra headers.
func Headers(err error) http.Header {
	pe := As(err)
	h := http.Header{"Content-Type": []string{ContentType}, "Cache-Control": []string{"no-store"}}
	if pe.RetryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(pe.RetryAfter))
	}
	for k, v := range pe.Header {
		h[k] = v
	}
	return h
}

// Write renders err as problem JSON. The internal cause is not written.
func Write(w http.ResponseWriter, err error, traceID string) {
	b := BodyOf(err, traceID)
	h := w.Header()
	for k, v := range Headers(err) {
		h[k] = v
	}
	w.WriteHeader(b.Status)
	_ = json.NewEncoder(w).Encode(b)
}
