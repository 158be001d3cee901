package api

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/danielgtaylor/huma/v2"
	"go.uber.org/zap"

	"slidecells/shared/db"
	"slidecells/shared/problem"
)

// The cell's one error path. Every error answer the cell sends, whoever raised it (the
// pipeline, a handler, huma's own request validation, an unrouted path), is written by fail,
// and by nothing else: huma builds no error answer of its own. An error reaches fail as an
// error value; fail logs its internal cause, records its code for the metrics and writes the
// problem answer (problem.Write: status, Content-Type, Cache-Control: no-store, the Retry-After
// policy, the body with its trace_id).

// fail is the one writer of the cell's error answers.
func (s *Server) fail(ctx context.Context, w http.ResponseWriter, err error) {
	pe := atRequest(problem.As(err))
	if pe.Code == problem.Internal && db.IsRetryable(err) {
		pe = conflicted(err)
	}
	noteError(ctx, pe.Code)
	switch {
	case inAttempt(ctx) && db.IsRetryable(err):
		// The execution's transaction runs again (a serialization failure): this answer is
		// thrown away. If the last run fails too, its error is logged as the request's.
		s.Log.Info("request execution rolled back; it runs again", zap.String("trace_id", TraceID(ctx)), zap.Error(err))
	case pe.Code != problem.ClientClosedRequest && (pe.Code == problem.Internal || pe.Cause != nil):
		s.Log.Error("request failed", zap.String("trace_id", TraceID(ctx)), zap.String("code", string(pe.Code)), zap.Error(err))
	}
	problem.Write(w, pe, TraceID(ctx))
}

// conflicted answers a serialization failure or deadlock that the database package's retries
// (Tx, Atomic, Q's single statements) did not cure: the request lost against concurrent writes,
// which is neither the client's fault nor a failure of the server, so it is 503
// SERVICE_UNAVAILABLE with Retry-After and retryable, never 500 INTERNAL. A server error is not
// an idempotent request's answer (idempotency.Storable): its writes were rolled back and its key
// stays free, so the client's retry with the same key runs it.
func conflicted(err error) *problem.Error {
	return &problem.Error{Code: problem.ServiceUnavailable, Message: "the request conflicted with concurrent writes; retry it",
		RetryAfter: 1, Retryable: true, Cause: err}
}

// Field errors. The domain packages name the fields of their own objects ("max_attempts",
// "colors.primary", "build_assets[2].path"): they know nothing of requests. A field error whose
// field names no request location is one of the request body's, and atRequest answers it at
// body.<field>; one that names a location (body, body.…, query.…, path.…, header.…) is the
// pipeline's or huma's and stays as it is. Handlers whose domain input is not the body (an
// upload's query parameters) map it with fieldsAt.

// requestLocations are the prefixes of field errors that name a request location already.
var requestLocations = []string{"body.", "query.", "path.", "header.", "cookie."}

// atRequest answers pe's domain field names at their request paths; pe itself is not changed
// (problem errors may be shared values).
func atRequest(pe *problem.Error) *problem.Error {
	if len(pe.Fields) == 0 {
		return pe
	}
	out := *pe
	out.Fields = make([]problem.FieldError, len(pe.Fields))
	for i, f := range pe.Fields {
		if f.Field != "" && f.Field != "body" && !hasLocation(f.Field) {
			f.Field = "body." + f.Field
		}
		out.Fields[i] = f
	}
	return &out
}

func hasLocation(field string) bool {
	for _, p := range requestLocations {
		if strings.HasPrefix(field, p) {
			return true
		}
	}
	return false
}

// fieldsAt answers the domain field errors of err at a request location other than the body,
// e.g. fieldsAt("query.", err) for a domain input that came as query parameters.
func fieldsAt(location string, err error) error {
	var pe *problem.Error
	if !errors.As(err, &pe) || len(pe.Fields) == 0 {
		return err
	}
	out := *pe
	out.Fields = make([]problem.FieldError, len(pe.Fields))
	for i, f := range pe.Fields {
		if f.Field != "" && f.Field != "body" && !hasLocation(f.Field) {
			f.Field = location + f.Field
		}
		out.Fields[i] = f
	}
	return &out
}

// fieldAt answers the domain field errors of err that name field at path: a domain baseline
// that came in a header, e.g. fieldAt(err, content.DraftHashField, "header.If-Match").
func fieldAt(err error, field, path string) error {
	var pe *problem.Error
	if !errors.As(err, &pe) || !slices.ContainsFunc(pe.Fields, func(f problem.FieldError) bool { return f.Field == field }) {
		return err
	}
	out := *pe
	out.Fields = slices.Clone(pe.Fields)
	for i := range out.Fields {
		if out.Fields[i].Field == field {
			out.Fields[i].Field = path
		}
	}
	return &out
}

// answer is what an operation's handler, run by huma, writes to. An error of the operation is
// written by fail, once, and closes the answer: what huma writes after that is dropped.
type answer struct {
	http.ResponseWriter
	s      *Server
	closed bool
}

type answerKey struct{}

// serve runs an operation's huma handler on an answer that its errors are written to.
func (s *Server) serve(next http.HandlerFunc, w http.ResponseWriter, r *http.Request) {
	a := &answer{ResponseWriter: w, s: s}
	next(a, r.WithContext(context.WithValue(r.Context(), answerKey{}, a)))
}

// failed writes err as the answer of the operation ctx belongs to.
func failed(ctx context.Context, err error) {
	a := answerOf(ctx)
	if a == nil {
		panic("api: an operation ran outside the pipeline") // Register routes every operation through it
	}
	a.fail(ctx, err)
}

func answerOf(ctx context.Context) *answer {
	a, _ := ctx.Value(answerKey{}).(*answer)
	return a
}

// fail writes err once and closes the answer.
func (a *answer) fail(ctx context.Context, err error) {
	if !a.closed {
		a.s.fail(ctx, a.ResponseWriter, err)
		a.closed = true
	}
}

func (a *answer) Header() http.Header {
	if a.closed {
		return http.Header{}
	}
	return a.ResponseWriter.Header()
}

func (a *answer) WriteHeader(code int) {
	if !a.closed {
		a.ResponseWriter.WriteHeader(code)
	}
}

func (a *answer) Write(p []byte) (int, error) {
	if a.closed {
		return len(p), nil
	}
	return a.ResponseWriter.Write(p)
}

func (a *answer) Unwrap() http.ResponseWriter { return a.ResponseWriter }

// errorBody is the error model huma documents (components/schemas/ErrorBody, served as
// application/problem+json). huma never sends one: its errors go through fail first.
type errorBody struct {
	problem.Body
}

func (e *errorBody) Error() string             { return string(e.Code) + ": " + e.Message }
func (e *errorBody) GetStatus() int            { return e.Status }
func (e *errorBody) ContentType(string) string { return problem.ContentType }

// humaStatusCodes name huma's own error statuses (validation, malformed or oversize bodies).
var humaStatusCodes = map[int]problem.Code{
	http.StatusUnprocessableEntity:   problem.ValidationFailed,
	http.StatusRequestEntityTooLarge: problem.PayloadTooLarge,
	http.StatusUnsupportedMediaType:  problem.UnsupportedMediaType,
	http.StatusNotFound:              problem.NotFound,
	http.StatusInternalServerError:   problem.Internal,
}

// humaError is one of huma's own errors as a problem: its status named by a code (BAD_REQUEST
// for any other), its details as field errors.
func humaError(status int, msg string, errs []error) *problem.Error {
	code, ok := humaStatusCodes[status]
	if !ok {
		code = problem.BadRequest
	}
	if code == problem.Internal {
		msg = "internal error"
	}
	if status == http.StatusBadRequest {
		// A malformed or empty JSON body: a request-schema error, 422 as the catalogue has it
		// (it has no 400), still named BAD_REQUEST, at body.
		status = http.StatusUnprocessableEntity
	}
	pe := &problem.Error{Code: code, Message: msg}
	if problem.Status(code) != status {
		pe.Status = status
	}
	for _, e := range errs {
		var d *huma.ErrorDetail
		if errors.As(e, &d) {
			field, msg := d.Location, d.Message
			if f, m, ok := clientJSONError(field, msg); ok {
				field, msg = f, m // no Go type names in answers
			}
			pe.Fields = append(pe.Fields, problem.FieldError{Field: field, Message: msg})
		} else if e != nil && status < 500 {
			field, msg := "", e.Error()
			if f, m, ok := clientJSONError("body", msg); ok {
				field, msg = f, m
			}
			if field == "" && status == http.StatusUnprocessableEntity {
				field = "body"
			}
			pe.Fields = append(pe.Fields, problem.FieldError{Field: field, Message: msg})
		}
	}
	if status == http.StatusUnprocessableEntity && len(pe.Fields) == 0 {
		pe.Fields = []problem.FieldError{{Field: "body", Message: msg}}
	}
	return pe
}

func init() {
	// huma's own errors are written by fail as soon as huma makes them.
	huma.NewErrorWithContext = func(hctx huma.Context, status int, msg string, errs ...error) huma.StatusError {
		pe := humaError(status, msg, errs)
		if hctx != nil {
			if a := answerOf(hctx.Context()); a != nil {
				a.fail(hctx.Context(), pe)
			}
		}
		return &errorBody{Body: problem.BodyOf(pe, "")}
	}
	huma.NewError = func(status int, msg string, errs ...error) huma.StatusError {
		return huma.NewErrorWithContext(nil, status, msg, errs...)
	}
}
