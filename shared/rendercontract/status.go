package rendercontract

import "net/http"

// Situation says in which situation an error is answered, where the code
// alone does not decide the HTTP status: the same RENDER_RESULT_LOST is 404
// for an unknown attempt, 409 for one that is not terminal yet and 410 for a
// reclaimed artifact.
type Situation string

// Situations. The zero value is the code's own status.
const (
	SituationDefault  Situation = ""
	SituationConflict Situation = "conflict"  // state conflict: already used, not terminal yet, generation fenced
	SituationNotFound Situation = "not_found" // no such thing on this worker epoch
	SituationGone     Situation = "gone"      // existed and was reclaimed or consumed
)

// httpStatus is the one table from (code, situation) to HTTP status of the
// renderer's control API. A code in a situation not listed answers the
// code's default (situation ""), and a code not listed answers 500.
var httpStatus = map[Code]map[Situation]int{
	CodeUnauthenticated:      {"": http.StatusUnauthorized},
	CodeContractMismatch:     {"": http.StatusBadRequest, SituationConflict: http.StatusConflict, SituationNotFound: http.StatusNotFound},
	CodeOutputLimitExceeded:  {"": http.StatusUnprocessableEntity},
	CodeProfileMismatch:      {"": http.StatusUnprocessableEntity},
	CodeDeadlineExceeded:     {"": http.StatusUnprocessableEntity},
	CodeInputExpired:         {"": http.StatusForbidden, SituationConflict: http.StatusConflict},
	CodeCancelled:            {"": http.StatusConflict},
	CodeWorkerBusy:           {"": http.StatusTooManyRequests},
	CodeQueueFull:            {"": http.StatusTooManyRequests},
	CodeServiceUnavailable:   {"": http.StatusServiceUnavailable},
	CodeResultLost:           {"": http.StatusNotFound, SituationConflict: http.StatusConflict, SituationGone: http.StatusGone},
	CodeInputNotReproducible: {"": http.StatusUnprocessableEntity},
	CodeContentError:         {"": http.StatusUnprocessableEntity},
	CodeAssetNotReady:        {"": http.StatusUnprocessableEntity},
	CodeBrowserLost:          {"": http.StatusBadGateway},
	CodeInternal:             {"": http.StatusInternalServerError},
}

// HTTPStatus is the status an error body is answered with.
func (e *Error) HTTPStatus() int {
	row, ok := httpStatus[e.Code]
	if !ok {
		return http.StatusInternalServerError
	}
	if st, ok := row[e.Situation]; ok {
		return st
	}
	return row[SituationDefault]
}
