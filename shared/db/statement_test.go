package db_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"slidecells/shared/db"
	"slidecells/shared/db/dbtest"
	"slidecells/shared/testenv"
)

// conflictDB is a database with one counter row, whose pool reports retries to *retries.
func conflictDB(t *testing.T) (*db.DB, *atomic.Int64) {
	t.Helper()
	d := dbtest.Open(t, dbtest.NewDatabase(t, nil, ""))
	ctx := context.Background()
	for _, sql := range []string{
		"CREATE TABLE counter (id INT8 PRIMARY KEY, n INT8 NOT NULL)",
		"INSERT INTO counter VALUES (1, 0)",
	} {
		if _, err := d.Pool.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	var retries atomic.Int64
	d.OnRetry = func(context.Context) { retries.Add(1) }
	return d, &retries
}

// concurrentUpdate runs stmt (which writes the counter row, as its own statement at
// SERIALIZABLE, the pool's default) while another transaction holds that row with an update of
// +10, and commits that transaction once stmt waits on it: PostgreSQL then fails stmt's first run
// with a real 40001 ("could not serialize access due to concurrent update"). It returns stmt's
// error.
func concurrentUpdate(t *testing.T, d *db.DB, label string, stmt func(ctx context.Context) error) error {
	t.Helper()
	ctx := context.Background()
	tx, err := d.Pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.Serializable})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, "UPDATE counter SET n = n + 10 WHERE id = 1"); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		done <- stmt(ctx)
	}()
	testenv.Eventually(t, 30*time.Second, 5*time.Millisecond, label+" waits on the row lock", func() error {
		var waiting bool
		err := d.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%/* ' || $1 || ' */%')`, label).Scan(&waiting)
		if err == nil && !waiting {
			err = errors.New("not waiting yet")
		}
		return err
	})
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		return err
	case <-time.After(time.Minute):
		t.Fatalf("%s did not finish after the other transaction committed", label)
		return nil
	}
}

func counterValue(t *testing.T, d *db.DB) int64 {
	t.Helper()
	var n int64
	if err := d.Pool.QueryRow(context.Background(), "SELECT n FROM counter WHERE id = 1").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestPoolStatementsSeeARealSerializationFailure is the control of the test below: the same
// concurrent update, sent straight to the pool (no retry), fails with 40001 and changes nothing.
func TestPoolStatementsSeeARealSerializationFailure(t *testing.T) {
	d, _ := conflictDB(t)
	err := concurrentUpdate(t, d, "control", func(ctx context.Context) error {
		_, err := d.Pool.Exec(ctx, "UPDATE counter SET n = n + 1 WHERE id = 1 /* control */")
		return err
	})
	if !db.IsRetryable(err) {
		t.Fatalf("the concurrent update on the pool: %v, want a serialization failure", err)
	}
	if n := counterValue(t, d); n != 10 {
		t.Fatalf("counter = %d, want 10 (only the other transaction's update)", n)
	}
}

// TestSingleStatementsRetrySerializationFailures: a statement run through Q outside Atomic that
// fails with a real serialization failure runs again and succeeds, through Exec, QueryRow and
// Query alike; its effect lands once.
func TestSingleStatementsRetrySerializationFailures(t *testing.T) {
	d, retries := conflictDB(t)
	want := int64(0)
	for _, c := range []struct {
		name string
		run  func(ctx context.Context) (int64, error) // returns the counter as the statement left it, or -1
	}{
		{"exec", func(ctx context.Context) (int64, error) {
			tag, err := d.Q(ctx).Exec(ctx, "UPDATE counter SET n = n + 1 WHERE id = 1 /* exec */")
			if err == nil && tag.RowsAffected() != 1 {
				err = fmt.Errorf("%d rows updated", tag.RowsAffected())
			}
			return -1, err
		}},
		{"queryrow", func(ctx context.Context) (int64, error) {
			var n int64
			err := d.Q(ctx).QueryRow(ctx, "UPDATE counter SET n = n + 1 WHERE id = 1 /* queryrow */ RETURNING n").Scan(&n)
			return n, err
		}},
		{"query", func(ctx context.Context) (int64, error) {
			rows, err := d.Q(ctx).Query(ctx, "UPDATE counter SET n = n + 1 WHERE id = 1 /* query */ RETURNING n")
			if err != nil {
				return 0, err
			}
			ns, err := pgx.CollectRows(rows, pgx.RowTo[int64])
			if err == nil && len(ns) != 1 {
				err = fmt.Errorf("%d rows, want 1", len(ns))
			}
			if err != nil {
				return 0, err
			}
			return ns[0], nil
		}},
	} {
		before := retries.Load()
		var got int64
		err := concurrentUpdate(t, d, c.name, func(ctx context.Context) error {
			var err error
			got, err = c.run(ctx)
			return err
		})
		want += 11
		if err != nil {
			t.Fatalf("%s: %v, want the statement retried past its serialization failure", c.name, err)
		}
		if r := retries.Load() - before; r < 1 {
			t.Fatalf("%s: %d retries reported; the statement did not conflict", c.name, r)
		}
		if got != -1 && got != want {
			t.Fatalf("%s: the statement returned %d, want %d", c.name, got, want)
		}
		if n := counterValue(t, d); n != want {
			t.Fatalf("%s: counter = %d, want %d (the statement's effect exactly once)", c.name, n, want)
		}
	}
}

// TestSingleStatementRetriesAreBounded: a statement that conflicts at every run runs
// StatementTries times and then returns its serialization failure; a statement that fails
// otherwise runs once.
func TestSingleStatementRetriesAreBounded(t *testing.T) {
	d := dbtest.Open(t, dbtest.NewDatabase(t, nil, ""))
	ctx := context.Background()
	for _, sql := range []string{
		"CREATE SEQUENCE always",
		"CREATE SEQUENCE broken",
		// nextval is not rolled back with the statement: the sequences count the runs.
		`CREATE FUNCTION doomed() RETURNS INT8 AS $$ BEGIN
			PERFORM nextval('always'); RAISE EXCEPTION 'conflict' USING ERRCODE = '40001'; END $$ LANGUAGE plpgsql`,
		`CREATE FUNCTION broken() RETURNS INT8 AS $$ BEGIN
			PERFORM nextval('broken'); RAISE EXCEPTION 'bug' USING ERRCODE = 'XX000'; END $$ LANGUAGE plpgsql`,
	} {
		if _, err := d.Pool.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	runs := func(seq string) int64 {
		var n int64
		if err := d.Pool.QueryRow(ctx, "SELECT last_value FROM "+seq).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	var n int64
	if err := d.Q(ctx).QueryRow(ctx, "SELECT doomed()").Scan(&n); !db.IsRetryable(err) {
		t.Fatalf("QueryRow of a statement that always conflicts: %v, want its 40001", err)
	}
	if r := runs("always"); r != db.StatementTries {
		t.Fatalf("QueryRow ran the statement %d times, want %d", r, db.StatementTries)
	}
	if _, err := d.Q(ctx).Exec(ctx, "SELECT doomed()"); !db.IsRetryable(err) {
		t.Fatalf("Exec: %v, want the 40001", err)
	}
	rows, err := d.Q(ctx).Query(ctx, "SELECT doomed()")
	if err == nil {
		_, err = pgx.CollectRows(rows, pgx.RowTo[int64])
	}
	if !db.IsRetryable(err) {
		t.Fatalf("Query: %v, want the 40001", err)
	}
	if r := runs("always"); r != 3*db.StatementTries {
		t.Fatalf("three statements ran %d times in all, want %d", r, 3*db.StatementTries)
	}
	if _, err := d.Q(ctx).Exec(ctx, "SELECT broken()"); err == nil || db.IsRetryable(err) {
		t.Fatalf("a failing statement: %v", err)
	}
	if r := runs("broken"); r != 1 {
		t.Fatalf("a statement that failed for another reason ran %d times, want 1", r)
	}
}

// TestReadConflictInsideAtomicRestartsIt: a read through Q inside Atomic that fails with a
// serialization failure dooms the transaction, so Atomic runs fn again, even when fn turned the
// failure into an error of its own (as a handler that answers a failed read does); the next
// statements of the doomed run fail with that failure at once.
func TestReadConflictInsideAtomicRestartsIt(t *testing.T) {
	d := dbtest.Open(t, dbtest.NewDatabase(t, nil, ""))
	ctx := context.Background()
	for _, sql := range []string{
		"CREATE SEQUENCE tries",
		`CREATE FUNCTION flaky() RETURNS INT8 AS $$ BEGIN
			IF nextval('tries') = 1 THEN RAISE EXCEPTION 'conflict' USING ERRCODE = '40001'; END IF;
			RETURN 7; END $$ LANGUAGE plpgsql`,
		"CREATE TABLE items (id INT8 PRIMARY KEY)",
	} {
		if _, err := d.Pool.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	errAnswered := errors.New("the handler answered the failed read")
	runs := 0
	err := d.Atomic(ctx, func(ctx context.Context, tx pgx.Tx) error {
		runs++
		var n int64
		if err := d.Q(ctx).QueryRow(ctx, "SELECT flaky()").Scan(&n); err != nil {
			if _, err := d.Q(ctx).Exec(ctx, "INSERT INTO items VALUES (1)"); !db.IsRetryable(err) {
				t.Errorf("a statement after the conflict: %v, want the conflict", err)
			}
			return errAnswered
		}
		_, err := d.Q(ctx).Exec(ctx, "INSERT INTO items VALUES ($1)", n)
		return err
	})
	if err != nil || runs != 2 {
		t.Fatalf("Atomic: %v after %d runs, want success at the second", err, runs)
	}
	if c := dbtest.Count(t, d, "SELECT count(*) FROM items WHERE id = 7"); c != 1 {
		t.Fatalf("%d rows from the second run, want 1", c)
	}
	// A failure that is not a conflict is fn's answer: no restart.
	runs = 0
	err = d.Atomic(ctx, func(ctx context.Context, tx pgx.Tx) error {
		runs++
		var n int64
		if err := d.Q(ctx).QueryRow(ctx, "SELECT id FROM items WHERE id = 99").Scan(&n); !errors.Is(err, pgx.ErrNoRows) {
			t.Errorf("missing row: %v", err)
		}
		return errAnswered
	})
	if !errors.Is(err, errAnswered) || runs != 1 {
		t.Fatalf("Atomic: %v after %d runs, want fn's error after one", err, runs)
	}
}
