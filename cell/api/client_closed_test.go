package api_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"slidecells/cell/idempotency"
	"slidecells/shared/testenv"
)

// A client that gives up while its write commits: the write stands (the execution is detached
// from the client), the access log and the metrics say 499 rather than 500, no error is logged,
// and the retry replays the answer instead of writing again.
func TestClientClosedIs499AndTheWriteStands(t *testing.T) {
	b := setup(t)
	core, logs := observer.New(zap.InfoLevel)
	b.api.Log = zap.New(core)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var gone atomic.Bool
	b.api.Idem.Failpoint = func(name string) error {
		if name == idempotency.BeforeCommit && !gone.Swap(true) {
			cancel() // the client goes away while the answer is being committed
			time.Sleep(300 * time.Millisecond)
		}
		return nil
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, b.srv.URL+"/api/v1/projects", strings.NewReader(`{"name":"Gone"}`))
	req.Header.Set("Authorization", "Bearer "+b.pat)
	req.Header.Set("X-Workspace-ID", b.ws)
	req.Header.Set("Idempotency-Key", "gone-1")
	req.Header.Set("Content-Type", "application/json")
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatal("the request was not cancelled")
	}
	var line observer.LoggedEntry
	testenv.Eventually(t, 10*time.Second, 20*time.Millisecond, "the access log line", func() error {
		l := logs.FilterMessage("request").All()
		if len(l) == 0 {
			return errors.New("none yet")
		}
		line = l[0]
		return nil
	})
	if got := line.ContextMap()["status"]; got != int64(499) {
		t.Fatalf("access log status %v, want 499 (%+v)", got, line.ContextMap())
	}
	if n := logs.FilterLevelExact(zap.ErrorLevel).Len(); n != 0 {
		t.Fatalf("%d error lines for a client that went away: %v", n, logs.FilterLevelExact(zap.ErrorLevel).All())
	}
	resp, body := b.call(t, call{method: "POST", path: "/api/v1/projects", ws: b.ws, key: "gone-1", body: `{"name":"Gone"}`})
	if resp.StatusCode != http.StatusCreated || resp.Header.Get("Idempotency-Replayed") != "true" {
		t.Fatalf("retry: %d %s %v", resp.StatusCode, body, resp.Header)
	}
	_, list := b.call(t, call{method: "GET", path: "/api/v1/projects", ws: b.ws})
	if n := strings.Count(string(list), `"name":"Gone"`); n != 1 {
		t.Fatalf("%d projects named Gone: %s", n, list)
	}
	m := b.metrics(t,
		`cell_requests_total{operation="create-project",status="499"} 1`,
		`cell_request_errors_total{code="CLIENT_CLOSED_REQUEST",operation="create-project"} 1`,
		`cell_idempotency_total{operation="create-project",outcome="executed"} 1`,
		`cell_idempotency_total{operation="create-project",outcome="replayed"} 1`,
		`cell_db_pool_max_connections`,
	)
	if strings.Contains(m, `operation="create-project",status="500"`) {
		t.Error("a client that went away was counted as a 500")
	}
}

// A write whose transaction meets a serialization failure runs again (idempotency.Exec): the
// request answers as its last execution did, and neither the metrics nor the error log count
// the rolled-back execution as a failure. A trigger fails the first project insert with 40001,
// the code PostgreSQL and CockroachDB give a serialization failure.
func TestRetriedExecutionIsNotAnError(t *testing.T) {
	b := setup(t)
	core, logs := observer.New(zap.InfoLevel)
	b.api.Log = zap.New(core)
	ctx := context.Background()
	for _, stmt := range []string{
		`CREATE SEQUENCE fail_once_seq`,
		`CREATE FUNCTION fail_once() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF nextval('fail_once_seq') = 1 THEN -- sequences are not rolled back: only the first insert fails
				RAISE EXCEPTION 'injected serialization failure' USING ERRCODE = '40001';
			END IF;
			RETURN NEW;
		END $$`,
		`CREATE TRIGGER fail_once BEFORE INSERT ON projects FOR EACH ROW EXECUTE FUNCTION fail_once()`,
	} {
		if _, err := b.api.DB.Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	resp, body := b.call(t, call{method: "POST", path: "/api/v1/projects", ws: b.ws, key: "retried-1", body: `{"name":"Retried"}`})
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("create: %d %s", resp.StatusCode, body)
	}
	var n int64
	if err := b.api.DB.Pool.QueryRow(ctx, `SELECT last_value FROM fail_once_seq`).Scan(&n); err != nil || n != 2 {
		t.Fatalf("the insert ran %d times (%v), want 2: the failure was not injected or not retried", n, err)
	}
	if l := logs.FilterLevelExact(zap.ErrorLevel).All(); len(l) != 0 {
		t.Errorf("%d error lines for a request that succeeded: %v", len(l), l)
	}
	if logs.FilterMessage("request execution rolled back; it runs again").Len() != 1 {
		t.Errorf("the rolled-back execution was not logged at info")
	}
	m := b.metrics(t,
		`cell_requests_total{operation="create-project",status="201"} 1`,
		`cell_tx_retries_total{operation="create-project"} 1`,
	)
	if strings.Contains(m, `cell_request_errors_total{code="INTERNAL",operation="create-project"}`) {
		t.Error("the rolled-back execution was counted as an INTERNAL error")
	}
}
