package api

import (
	"context"
	"errors"
	"net/http"

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
	pe := problem.As(err)
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

// humaError is one of huma's own errors as a problem: its status named by a code (400
// BAD_REQUEST for any other), its details as field errors.
func humaError(status int, msg string, errs []error) *problem.Error {
	code, ok := humaStatusCodes[status]
	if !ok {
		code = problem.BadRequest
	}
	if code == problem.Internal {
		msg = "internal error"
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
			pe.Fields = append(pe.Fields, problem.FieldError{Field: field, Message: msg})
		}
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
