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
)

// Code is a stable, documented error code. Clients branch on codes, never on messages.
type Code string

// The public error codes. The catalogue with meanings lives in docs/errors.md.
const (
	BadRequest           Code = "BAD_REQUEST"
	WorkspaceIDInvalid   Code = "WORKSPACE_ID_INVALID"
	WorkspaceIDConflict  Code = "WORKSPACE_ID_CONFLICT"
	WorkspaceRequired    Code = "WORKSPACE_REQUIRED"
	IdempotencyKeyNeeded Code = "IDEMPOTENCY_KEY_REQUIRED"
	IdempotencyKeyBad    Code = "IDEMPOTENCY_KEY_INVALID"
	Unauthenticated      Code = "UNAUTHENTICATED"
	ScopeRequired        Code = "SCOPE_REQUIRED"
	Forbidden            Code = "FORBIDDEN"
	NotFound             Code = "NOT_FOUND"
	MethodNotAllowed     Code = "METHOD_NOT_ALLOWED"
	VersionConflict      Code = "VERSION_CONFLICT"
	IdempotencyConflict  Code = "IDEMPOTENCY_KEY_REUSED"
	IdempotencyInFlight  Code = "IDEMPOTENCY_KEY_IN_FLIGHT"
	StateConflict        Code = "STATE_CONFLICT"
	NameConflict         Code = "NAME_CONFLICT"
	PayloadTooLarge      Code = "PAYLOAD_TOO_LARGE"
	UnsupportedMedia     Code = "UNSUPPORTED_MEDIA_TYPE"
	ValidationFailed     Code = "VALIDATION_FAILED"
	Misdirected          Code = "WORKSPACE_MISDIRECTED"
	RateLimited          Code = "RATE_LIMITED"
	Internal             Code = "INTERNAL"
	CellUnavailable      Code = "CELL_UNAVAILABLE"
	DirectoryUnavailable Code = "DIRECTORY_UNAVAILABLE"
	BodyTooLargeToRetry  Code = "RETRY_BODY_TOO_LARGE"
	Unavailable          Code = "SERVICE_UNAVAILABLE"
	// ClientClosed is what logs and metrics show for a request whose client went away before
	// the answer (nginx's 499); no client ever reads it.
	ClientClosed Code = "CLIENT_CLOSED_REQUEST"
)

// StatusClientClosed is the status logged for ClientClosed.
const StatusClientClosed = 499

var statuses = map[Code]int{
	BadRequest:           http.StatusBadRequest,
	WorkspaceIDInvalid:   http.StatusBadRequest,
	WorkspaceIDConflict:  http.StatusBadRequest,
	WorkspaceRequired:    http.StatusBadRequest,
	IdempotencyKeyNeeded: http.StatusBadRequest,
	IdempotencyKeyBad:    http.StatusBadRequest,
	Unauthenticated:      http.StatusUnauthorized,
	ScopeRequired:        http.StatusForbidden,
	Forbidden:            http.StatusForbidden,
	NotFound:             http.StatusNotFound,
	MethodNotAllowed:     http.StatusMethodNotAllowed,
	VersionConflict:      http.StatusConflict,
	IdempotencyConflict:  http.StatusConflict,
	IdempotencyInFlight:  http.StatusConflict,
	StateConflict:        http.StatusConflict,
	NameConflict:         http.StatusConflict,
	PayloadTooLarge:      http.StatusRequestEntityTooLarge,
	UnsupportedMedia:     http.StatusUnsupportedMediaType,
	ValidationFailed:     http.StatusUnprocessableEntity,
	Misdirected:          http.StatusMisdirectedRequest,
	RateLimited:          http.StatusTooManyRequests,
	Internal:             http.StatusInternalServerError,
	CellUnavailable:      http.StatusServiceUnavailable,
	DirectoryUnavailable: http.StatusServiceUnavailable,
	BodyTooLargeToRetry:  http.StatusServiceUnavailable,
	Unavailable:          http.StatusServiceUnavailable,
	ClientClosed:         StatusClientClosed,
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
	Cause      error
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
	return &Error{Code: c, Message: fmt.Sprintf(format, args...)}
}

// Wrap returns an internal error whose cause is logged but never shown.
// A context cancellation (the client went away) becomes ClientClosed instead.
func Wrap(err error, msg string) *Error {
	if errors.Is(err, context.Canceled) {
		return &Error{Code: ClientClosed, Message: "the client closed the request", Cause: err}
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

// As extracts an *Error; anything else becomes an internal error.
func As(err error) *Error {
	var pe *Error
	if errors.As(err, &pe) {
		return pe
	}
	if errors.Is(err, context.Canceled) {
		return &Error{Code: ClientClosed, Message: "the client closed the request", Cause: err}
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
	return Body{Type: "about:blank", Title: http.StatusText(st), Status: st, Code: pe.Code,
		Message: pe.Message, TraceID: traceID, Retryable: pe.Retryable, Errors: pe.Fields}
}

// Write renders err as problem JSON. The internal cause is not written.
func Write(w http.ResponseWriter, err error, traceID string) {
	pe := As(err)
	b := BodyOf(pe, traceID)
	h := w.Header()
	h.Set("Content-Type", ContentType)
	h.Set("Cache-Control", "no-store")
	if pe.RetryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(pe.RetryAfter))
	}
	for k, v := range pe.Header {
		h[k] = v
	}
	w.WriteHeader(b.Status)
	_ = json.NewEncoder(w).Encode(b)
}
