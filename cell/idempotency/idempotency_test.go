package idempotency

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"slidecells/migrations"
	"slidecells/shared/db/dbtest"
	"slidecells/shared/failpoint"
	"slidecells/shared/problem"
)

// fixture is a Store on its own database, a clock the test moves, and an exec that creates one
// project row per execution inside the request's transaction (the business write).
type fixture struct {
	s    *Store
	now  atomic.Pointer[time.Time]
	runs atomic.Int64 // executions that reached the business write
}

func setup(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f.now.Store(&start)
	d := dbtest.Open(t, dbtest.NewDatabase(t, migrations.FS, migrations.Cell))
	f.s = &Store{DB: d, Retention: 24 * time.Hour, Now: func() time.Time { return *f.now.Load() }}
	return f
}

func (f *fixture) advance(d time.Duration) {
	n := f.now.Load().Add(d)
	f.now.Store(&n)
}

// create is an Exec that inserts a project named name and answers 201 with its ID.
func (f *fixture) create(name string) Exec {
	return func(ctx context.Context) Response {
		id := fmt.Sprintf("prj_%d", f.runs.Add(1))
		err := f.s.DB.Tx(ctx, func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `INSERT INTO projects (workspace_id, id, name, created_by) VALUES ('ws', $1, $2, 'u')`, id, name)
			return err
		})
		if err != nil {
			return Response{Status: 500, Body: []byte(err.Error())}
		}
		return Response{Status: 201, Header: http.Header{"Location": {"/p/" + id}, "Date": {"x"}}, Body: []byte(id)}
	}
}

func (f *fixture) projects(t *testing.T, name string) int {
	t.Helper()
	return dbtest.Count(t, f.s.DB, `SELECT count(*) FROM projects WHERE name = $1`, name)
}

func key(k string) Key { return Key{WorkspaceID: "ws", UserID: "u", OperationID: "op", Key: k} }

var (
	fpA = Fingerprint("POST", "/x", nil, []byte(`{"a":1}`))
	fpB = Fingerprint("POST", "/x", nil, []byte(`{"a":2}`))
)

func code(err error) problem.Code { return problem.As(err).Code }

func TestReplayReuseAndRetention(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	first, replayed, err := f.s.Run(ctx, key("k1"), fpA, f.create("one"))
	if err != nil || replayed || first.Status != 201 {
		t.Fatalf("first: %+v %v %v", first, replayed, err)
	}
	again, replayed, err := f.s.Run(ctx, key("k1"), Fingerprint("POST", "/x", nil, []byte(`{ "a" : 1 }`)), f.create("one"))
	if err != nil || !replayed || again.Status != 201 || string(again.Body) != string(first.Body) ||
		again.Header.Get("Location") != first.Header.Get("Location") || again.Header.Get("Date") != "" {
		t.Fatalf("replay: %+v %v %v", again, replayed, err)
	}
	if _, _, err := f.s.Run(ctx, key("k1"), fpB, f.create("one")); code(err) != problem.IdempotencyKeyReused {
		t.Fatalf("reuse: %v", err)
	}
	if n := f.projects(t, "one"); n != 1 {
		t.Fatalf("%d projects, want 1", n)
	}
	// Past retention the key is new again, before and after the purge.
	f.advance(25 * time.Hour)
	if _, replayed, err := f.s.Run(ctx, key("k1"), fpB, f.create("one")); err != nil || replayed {
		t.Fatalf("after retention: %v %v", replayed, err)
	}
	f.advance(25 * time.Hour)
	if n, err := f.s.Purge(ctx, 100); err != nil || n != 1 {
		t.Fatalf("purge: %d %v", n, err)
	}
	if _, replayed, err := f.s.Run(ctx, key("k1"), fpA, f.create("one")); err != nil || replayed {
		t.Fatalf("after purge: %v %v", replayed, err)
	}
	if n := f.projects(t, "one"); n != 3 {
		t.Fatalf("%d projects, want 3", n)
	}
}

func TestServerErrorsAndMisdirectsAreNotStoredAndRollBack(t *testing.T) {
	for _, status := range []int{500, 503, http.StatusMisdirectedRequest} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			f := setup(t)
			ctx := context.Background()
			failing := func(ctx context.Context) Response {
				f.create("doomed")(ctx)
				return Response{Status: status}
			}
			resp, replayed, err := f.s.Run(ctx, key("k"), fpA, failing)
			if err != nil || replayed || resp.Status != status {
				t.Fatalf("%+v %v %v", resp, replayed, err)
			}
			if n := f.projects(t, "doomed"); n != 0 {
				t.Fatalf("write of a %d answer committed", status)
			}
			// The key is free at once: the retry runs.
			if resp, replayed, err := f.s.Run(ctx, key("k"), fpA, f.create("doomed")); err != nil || replayed || resp.Status != 201 {
				t.Fatalf("retry: %+v %v %v", resp, replayed, err)
			}
		})
	}
}

func TestClientErrorsAreStoredWithoutTheirWrites(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	// A 409 after a write that its own savepoint rolled back: the answer is kept, the write not.
	conflict := func(ctx context.Context) Response {
		err := f.s.DB.Tx(ctx, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `INSERT INTO projects (workspace_id, id, name, created_by) VALUES ('ws', 'p1', 'half', 'u')`); err != nil {
				return err
			}
			return problem.New(problem.VersionConflict, "stale")
		})
		return Response{Status: problem.Status(problem.As(err).Code), Body: []byte("stale")}
	}
	if resp, _, err := f.s.Run(ctx, key("k"), fpA, conflict); err != nil || resp.Status != 409 {
		t.Fatalf("%+v %v", resp, err)
	}
	if n := f.projects(t, "half"); n != 0 {
		t.Fatal("a failed write committed with its answer")
	}
	if resp, replayed, err := f.s.Run(ctx, key("k"), fpA, f.create("x")); err != nil || !replayed || resp.Status != 409 {
		t.Fatalf("replay: %+v %v %v", resp, replayed, err)
	}
}

// While another transaction holds the key (an execution in progress, or a frozen one), the
// request is in flight; an execution that dies leaves nothing behind and the retry runs at once.
func TestInFlightAndDeadExecutions(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	conn, err := f.s.DB.Pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := f.s.claim(ctx, tx, key("k")); err != nil || !ok {
		t.Fatalf("claim: %v %v", ok, err)
	}
	for _, fp := range [][]byte{fpA, fpB} {
		if _, _, err := f.s.Run(ctx, key("k"), fp, f.create("p")); code(err) != problem.IdempotencyKeyInFlight ||
			problem.As(err).RetryAfter == 0 || !problem.As(err).Retryable {
			t.Fatalf("while held: %v", err)
		}
	}
	// The holder dies: its connection goes, and with it the transaction and the key's row.
	if err := conn.Conn().Close(ctx); err != nil {
		t.Fatal(err)
	}
	conn.Release()
	if resp, replayed, err := f.s.Run(ctx, key("k"), fpA, f.create("p")); err != nil || replayed || resp.Status != 201 {
		t.Fatalf("after the holder died: %+v %v %v", resp, replayed, err)
	}
	if resp, replayed, err := f.s.Run(ctx, key("k"), fpA, f.create("p")); err != nil || !replayed || resp.Status != 201 {
		t.Fatalf("replay: %+v %v %v", resp, replayed, err)
	}
	if n := f.projects(t, "p"); n != 1 {
		t.Fatalf("%d projects, want 1", n)
	}
}

// A duplicate that arrives while the first execution runs waits up to InFlightWait: if the first
// finishes by then it gets the first's answer, else it is told "in flight"; either way one write.
func TestDuplicateDuringExecution(t *testing.T) {
	for _, tc := range []struct {
		name     string
		wait     time.Duration
		replayed bool
	}{
		{"first finishes within the wait: replay", 10 * time.Second, true},
		{"first outlasts the wait: in flight", 50 * time.Millisecond, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := setup(t)
			f.s.InFlightWait = tc.wait
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			started, proceed := make(chan struct{}), make(chan struct{})
			var once sync.Once
			slow := func(ctx context.Context) Response {
				r := f.create("p")(ctx)
				once.Do(func() { close(started) })
				select {
				case <-proceed:
				case <-ctx.Done():
				}
				return r
			}
			type result struct {
				resp Response
				err  error
			}
			first := make(chan result, 1)
			go func() {
				r, _, err := f.s.Run(ctx, key("k"), fpA, slow)
				first <- result{r, err}
			}()
			select {
			case <-started:
			case <-ctx.Done():
				t.Fatal("first execution did not start")
			}
			if !tc.replayed {
				if _, _, err := f.s.Run(ctx, key("k"), fpA, f.create("p")); code(err) != problem.IdempotencyKeyInFlight {
					t.Fatalf("duplicate: %v", err)
				}
				close(proceed)
			} else {
				go func() { time.Sleep(200 * time.Millisecond); close(proceed) }()
			}
			dup, replayed, err := f.s.Run(ctx, key("k"), fpA, f.create("p"))
			r := <-first
			if r.err != nil || r.resp.Status != 201 {
				t.Fatalf("first: %+v", r)
			}
			if err != nil || !replayed || string(dup.Body) != string(r.resp.Body) {
				t.Fatalf("duplicate after the first: %+v %v %v, want a replay of %q", dup, replayed, err, r.resp.Body)
			}
			if n := f.projects(t, "p"); n != 1 {
				t.Fatalf("%d projects, want exactly 1", n)
			}
		})
	}
}

func TestFailpoints(t *testing.T) {
	ctx := context.Background()
	retry := func(t *testing.T, f *fixture, what string, replay bool) {
		t.Helper()
		if resp, replayed, err := f.s.Run(ctx, key("k"), fpA, f.create("p")); err != nil || replayed != replay || resp.Status != 201 {
			t.Fatalf("%s: %+v %v %v", what, resp, replayed, err)
		}
	}
	cases := []struct {
		name, point string
		committed   int  // projects after the failure
		replay      bool // the retry replays the first answer
	}{
		{"before commit: nothing committed, the retry runs once", BeforeCommit, 0, false},
		{"after commit: the answer is lost, the retry replays it, later too", AfterCommit, 1, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := setup(t)
			fail := failpoint.Points{c.point: "error"}
			f.s.Failpoint = fail.Hit
			if _, _, err := f.s.Run(ctx, key("k"), fpA, f.create("p")); code(err) != problem.Internal {
				t.Fatalf("want a server error, got %v", err)
			}
			if n := f.projects(t, "p"); n != c.committed {
				t.Fatalf("%d projects after the failure, want %d", n, c.committed)
			}
			clear(fail)
			retry(t, f, "retry", c.replay)
			f.advance(10 * time.Minute)
			retry(t, f, "retry later", true)
			if n := f.projects(t, "p"); n != 1 {
				t.Fatalf("%d projects, want 1", n)
			}
		})
	}
}

func TestPanicFreesTheKey(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	func() {
		defer func() { _ = recover() }()
		_, _, _ = f.s.Run(ctx, key("k"), fpA, func(ctx context.Context) Response {
			f.create("p")(ctx)
			panic("handler bug")
		})
	}()
	if resp, replayed, err := f.s.Run(ctx, key("k"), fpA, f.create("p")); err != nil || replayed || resp.Status != 201 {
		t.Fatalf("after a panic: %+v %v %v", resp, replayed, err)
	}
	if n := f.projects(t, "p"); n != 1 {
		t.Fatalf("%d projects, want 1", n)
	}
}

// Sixteen clients with a hundred distinct keys each: no error, no key left executing, every key
// replays its answer afterwards.
func TestConcurrentDistinctKeys(t *testing.T) {
	if testing.Short() {
		t.Skip("concurrency test")
	}
	f := setup(t)
	f.s.Now = nil
	var retries atomic.Int64
	f.s.DB.OnRetry = func(context.Context) { retries.Add(1) }
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const clients, perClient = 16, 100
	errs := make(chan error, clients)
	for c := range clients {
		go func() {
			for i := range perClient {
				k := key(fmt.Sprintf("c%d-%d", c, i))
				resp, replayed, err := f.s.Run(ctx, k, fpA, f.create("many"))
				if err != nil || replayed || resp.Status != 201 {
					errs <- fmt.Errorf("%s: %+v %v %v", k.Key, resp.Status, replayed, err)
					return
				}
			}
			errs <- nil
		}()
	}
	for range clients {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if n := f.projects(t, "many"); n != clients*perClient {
		t.Fatalf("%d projects, want %d", n, clients*perClient)
	}
	var executing int
	if err := f.s.DB.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM idempotency_locks) - (SELECT count(*) FROM idempotency_keys WHERE state = 'done')`).Scan(&executing); err != nil || executing != 0 {
		t.Fatalf("%d keys left executing (%v)", executing, err)
	}
	for c := range clients {
		k := key(fmt.Sprintf("c%d-%d", c, perClient-1))
		if _, replayed, err := f.s.Run(ctx, k, fpA, f.create("many")); err != nil || !replayed {
			t.Fatalf("%s does not replay: %v %v", k.Key, replayed, err)
		}
	}
	t.Logf("%d serialization retries for %d writes", retries.Load(), clients*perClient)
}

// Sixteen clients sending the same request with one key, each retrying while it is in flight:
// exactly one execution commits and every client gets its answer.
func TestConcurrentSameKey(t *testing.T) {
	f := setup(t)
	f.s.Now = nil
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const clients = 16
	bodies := make(chan string, clients)
	for range clients {
		go func() {
			for ctx.Err() == nil {
				resp, _, err := f.s.Run(ctx, key("one"), fpA, f.create("single"))
				if code(err) == problem.IdempotencyKeyInFlight {
					time.Sleep(5 * time.Millisecond)
					continue
				}
				if err != nil || resp.Status != 201 {
					bodies <- fmt.Sprintf("error %v %d", err, resp.Status)
					return
				}
				bodies <- string(resp.Body)
				return
			}
			bodies <- "timeout"
		}()
	}
	first := ""
	for range clients {
		b := <-bodies
		if first == "" {
			first = b
		}
		if b != first || b == "timeout" || len(b) > 5 && b[:5] == "error" {
			t.Fatalf("answers differ: %q vs %q", b, first)
		}
	}
	if n := f.projects(t, "single"); n != 1 {
		t.Fatalf("%d projects, want exactly 1", n)
	}
}

// A first-time key whose claim waits past InFlightWait on a lock that is not the key's (here an
// advisory lock that a trigger on the locks table takes, held by another transaction for the
// first round only; under load, the extension lock of the table's index, seen in pg_locks as
// "extend ExclusiveLock idempotency_locks_pkey") is not "in flight": the next round claims it
// and the request runs. A key held by another execution all along stays in flight after the
// last round.
func TestClaimWaitOnAnotherLockIsNotInFlight(t *testing.T) {
	f := setup(t)
	f.s.InFlightWait = 20 * time.Millisecond
	ctx := context.Background()
	for _, sql := range []string{
		`CREATE FUNCTION contend() RETURNS trigger AS $$ BEGIN PERFORM pg_advisory_xact_lock(4242); RETURN NEW; END $$ LANGUAGE plpgsql`,
		`CREATE TRIGGER contend BEFORE INSERT ON idempotency_locks FOR EACH ROW EXECUTE FUNCTION contend()`,
	} {
		if _, err := f.s.DB.Pool.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	holder, err := f.s.DB.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = holder.Rollback(ctx) }()
	if _, err := holder.Exec(ctx, "SELECT pg_advisory_xact_lock(4242)"); err != nil {
		t.Fatal(err)
	}
	var timedOut atomic.Int64
	f.s.Failpoint = func(name string) error {
		if name == WaitTimedOut && timedOut.Add(1) == 1 {
			if err := holder.Rollback(ctx); err != nil {
				t.Error(err)
			}
		}
		return nil
	}
	resp, replayed, err := f.s.Run(ctx, key("first-time"), fpA, f.create("p"))
	if err != nil || replayed || resp.Status != 201 {
		t.Fatalf("a first-time key after a wait on another lock: %+v %v %v, want it executed", resp, replayed, err)
	}
	if n := timedOut.Load(); n != 1 {
		t.Fatalf("%d timed-out waits, want 1 (the advisory lock)", n)
	}
	if n := f.projects(t, "p"); n != 1 {
		t.Fatalf("%d projects, want 1", n)
	}

	// A key held all along: every round times out, then "in flight".
	timedOut.Store(100)
	tx, err := f.s.DB.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if ok, err := f.s.claim(ctx, tx, key("held")); err != nil || !ok {
		t.Fatalf("claim: %v %v", ok, err)
	}
	if _, _, err := f.s.Run(ctx, key("held"), fpA, f.create("q")); code(err) != problem.IdempotencyKeyInFlight {
		t.Fatalf("a held key: %v, want in flight", err)
	}
	if n := timedOut.Load() - 100; n != maxRounds {
		t.Fatalf("%d timed-out rounds for a held key, want %d", n, maxRounds)
	}
}
