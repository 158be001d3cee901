package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"slidecells/cell/idempotency"
	"slidecells/shared/db"
)

// conflictBody is the part of a problem answer these tests read.
type conflictBody struct {
	Code      string `json:"code"`
	Retryable bool   `json:"retryable"`
	TraceID   string `json:"trace_id"`
	Message   string `json:"message"`
}

func mustConflictAnswer(t *testing.T, what string, resp *http.Response, body []byte) {
	t.Helper()
	var p conflictBody
	_ = json.Unmarshal(body, &p)
	if resp.StatusCode != http.StatusServiceUnavailable || p.Code != "SERVICE_UNAVAILABLE" {
		t.Fatalf("%s: %d %s, want 503 SERVICE_UNAVAILABLE", what, resp.StatusCode, body)
	}
	if resp.Header.Get("Retry-After") == "" || !p.Retryable || p.TraceID == "" {
		t.Fatalf("%s: no Retry-After, retryable marker or trace_id: %v %s", what, resp.Header, body)
	}
	if strings.Contains(string(body), "40001") || strings.Contains(strings.ToLower(string(body)), "serializ") {
		t.Fatalf("%s: the database's error reaches the answer: %s", what, body)
	}
}

// TestReadConflictThatPersistsIs503: a read whose statement keeps failing with a serialization
// failure (the projects table is swapped for a view whose every read raises a real 40001 in
// the database) is run again by the cell a bounded number of times, then answered 503
// SERVICE_UNAVAILABLE with Retry-After and the retryable marker, never 500 INTERNAL; once the
// conflict is gone the same read answers 200.
func TestReadConflictThatPersistsIs503(t *testing.T) {
	b := setup(t)
	id, _ := b.createProject(t, b.srv.URL, b.ws, "Contended")
	d := b.api.Idem.DB
	ctx := context.Background()
	for _, sql := range []string{
		"CREATE SEQUENCE conflict_runs",
		`CREATE FUNCTION conflict() RETURNS BOOLEAN AS $$ BEGIN
			PERFORM nextval('conflict_runs');
			RAISE EXCEPTION 'could not serialize access (test)' USING ERRCODE = '40001'; END $$ LANGUAGE plpgsql VOLATILE`,
		"ALTER TABLE projects RENAME TO projects_real",
		"CREATE VIEW projects AS SELECT * FROM projects_real WHERE conflict()",
	} {
		if _, err := d.Pool.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	runs := func() int64 {
		var n int64
		if err := d.Pool.QueryRow(ctx, "SELECT last_value FROM conflict_runs").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	resp, body := b.call(t, call{method: "GET", path: "/api/v1/projects/" + id, ws: b.ws})
	mustConflictAnswer(t, "GET project", resp, body)
	if n := runs(); n != db.StatementTries {
		t.Fatalf("the read ran %d times, want %d (retried, bounded)", n, db.StatementTries)
	}
	resp, body = b.call(t, call{method: "GET", path: "/api/v1/projects", ws: b.ws})
	mustConflictAnswer(t, "list projects", resp, body)
	if n := runs(); n != 2*db.StatementTries {
		t.Fatalf("the reads ran %d times in all, want %d", n, 2*db.StatementTries)
	}
	for _, sql := range []string{"DROP VIEW projects", "ALTER TABLE projects_real RENAME TO projects"} {
		if _, err := d.Pool.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	if resp, body := b.call(t, call{method: "GET", path: "/api/v1/projects/" + id, ws: b.ws}); resp.StatusCode != http.StatusOK {
		t.Fatalf("GET project once the conflict is gone: %d %s", resp.StatusCode, body)
	}
}

// TestConflictedIdempotentRequestLeavesItsKeyFree: an idempotent create whose transaction
// keeps failing with a serialization failure (a failpoint at its commit) is retried by the cell,
// then answered 503 SERVICE_UNAVAILABLE with Retry-After, not 500 and not 409
// IDEMPOTENCY_KEY_IN_FLIGHT; nothing of it committed, and the same key sent again runs the
// request (201, not replayed, one project), and then replays.
func TestConflictedIdempotentRequestLeavesItsKeyFree(t *testing.T) {
	b := setup(t)
	b.api.Idem.DB.MaxRetries = 3
	var conflicts atomic.Int64
	var conflicting atomic.Bool
	conflicting.Store(true)
	b.api.Idem.Failpoint = func(name string) error {
		if name == idempotency.BeforeCommit {
			if conflicting.Load() {
				conflicts.Add(1)
				return &pgconn.PgError{Code: "40001", Message: "could not serialize access (failpoint)"}
			}
		}
		return nil
	}
	create := call{method: "POST", path: "/api/v1/projects", ws: b.ws, key: "conflicted-1", body: `{"name":"Conflicted"}`}
	resp, body := b.call(t, create)
	mustConflictAnswer(t, "create under a lasting conflict", resp, body)
	if n := conflicts.Load(); n < 2 || n > 4 {
		t.Fatalf("the create ran %d times, want 2 to 4 (retried, at most MaxRetries times)", n)
	}
	if resp.Header.Get("Idempotency-Replayed") != "" {
		t.Fatalf("a conflict answer marked as replayed: %v", resp.Header)
	}
	_, list := b.call(t, call{method: "GET", path: "/api/v1/projects", ws: b.ws})
	if strings.Contains(string(list), "Conflicted") {
		t.Fatalf("a project of the conflicted create committed: %s", list)
	}
	// The conflict answer is not the key's answer: the same key again runs the request.
	conflicting.Store(false)
	resp, body = b.call(t, create)
	if resp.StatusCode != http.StatusCreated || resp.Header.Get("Idempotency-Replayed") == "true" {
		t.Fatalf("the same key after the 503: %d %s %v, want a fresh 201", resp.StatusCode, body, resp.Header)
	}
	again, body2 := b.call(t, create)
	if again.StatusCode != http.StatusCreated || again.Header.Get("Idempotency-Replayed") != "true" || string(body2) != string(body) {
		t.Fatalf("third send: %d %s %v, want the second's answer replayed", again.StatusCode, body2, again.Header)
	}
	_, list = b.call(t, call{method: "GET", path: "/api/v1/projects", ws: b.ws})
	if n := strings.Count(string(list), `"name":"Conflicted"`); n != 1 {
		t.Fatalf("%d projects named Conflicted, want 1: %s", n, list)
	}
	// The outcome metric says the conflicted run stored nothing.
	b.metrics(t,
		`cell_requests_total{operation="create-project",status="503"} 1`,
		`cell_request_errors_total{code="SERVICE_UNAVAILABLE",operation="create-project"} 1`,
	)
}
