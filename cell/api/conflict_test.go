package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"go.uber.org/zap"

	"slidecells/shared/problem"
)

// TestReadConflictIsRetryableNotInternal: a serialization failure that reaches the answer of a
// read (no execution that runs again) is 503 SERVICE_UNAVAILABLE with Retry-After and
// retryable, not 500 INTERNAL; other failures stay 500.
func TestReadConflictIsRetryableNotInternal(t *testing.T) {
	s := &Server{Log: zap.NewNop()}
	for _, c := range []struct {
		err    error
		status int
		code   string
	}{
		{fmt.Errorf("reading the job: %w", &pgconn.PgError{Code: "40001", Message: "could not serialize access"}), 503, "SERVICE_UNAVAILABLE"},
		{&pgconn.PgError{Code: "40P01", Message: "deadlock detected"}, 503, "SERVICE_UNAVAILABLE"},
		{&pgconn.PgError{Code: "42P01", Message: "relation does not exist"}, 500, "INTERNAL"},
		{problem.New(problem.NotFound, "no such job"), 404, "NOT_FOUND"},
	} {
		rec := httptest.NewRecorder()
		s.fail(context.Background(), rec, c.err)
		var body struct {
			Code      string `json:"code"`
			Retryable bool   `json:"retryable"`
		}
		_ = json.Unmarshal(rec.Body.Bytes(), &body)
		if rec.Code != c.status || body.Code != c.code {
			t.Errorf("%v: %d %s, want %d %s", c.err, rec.Code, rec.Body, c.status, c.code)
		}
		if c.status == http.StatusServiceUnavailable && (rec.Header().Get("Retry-After") == "" || !body.Retryable) {
			t.Errorf("%v: no Retry-After or not retryable: %v %s", c.err, rec.Header(), rec.Body)
		}
	}
}
