package db_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"

	"slidecells/shared/db"
	"slidecells/shared/db/dbtest"
)

func atomicDB(t *testing.T) *db.DB {
	t.Helper()
	d := dbtest.Open(t, dbtest.NewDatabase(t, nil, ""))
	if _, err := d.Pool.Exec(context.Background(), "CREATE TABLE items (id INT8 PRIMARY KEY, n INT8 NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	return d
}

func count(t *testing.T, q db.Querier, ctx context.Context) int {
	t.Helper()
	var n int
	if err := q.QueryRow(ctx, "SELECT count(*) FROM items").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func insert(ctx context.Context, d *db.DB, id int) error {
	return d.Tx(ctx, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "INSERT INTO items VALUES ($1, 0)", id)
		return err
	})
}

// Inside Atomic, Tx calls join one transaction: reads through Q see its writes, nothing is
// visible outside before the commit, and a failing Tx rolls the whole back (RolledBack) even
// when fn goes on and returns nil.
func TestAtomicComposesTxCalls(t *testing.T) {
	d := atomicDB(t)
	ctx := context.Background()
	err := d.Atomic(ctx, func(ctx context.Context, _ pgx.Tx) error {
		if !db.InAtomic(ctx) {
			t.Error("context does not carry the transaction")
		}
		if err := insert(ctx, d, 1); err != nil {
			return err
		}
		if err := insert(ctx, d, 2); err != nil {
			return err
		}
		if n := count(t, d.Q(ctx), ctx); n != 2 {
			t.Errorf("inside: %d rows, want 2", n)
		}
		if n := count(t, d.Pool, ctx); n != 0 {
			t.Errorf("outside before commit: %d rows", n)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := count(t, d.Pool, ctx); n != 2 {
		t.Fatalf("after commit: %d rows, want 2", n)
	}
	bad := errors.New("business rule")
	err = d.Atomic(ctx, func(ctx context.Context, _ pgx.Tx) error {
		if err := insert(ctx, d, 3); err != nil {
			return err
		}
		if err := d.Tx(ctx, func(tx pgx.Tx) error { return bad }); !errors.Is(err, bad) {
			t.Errorf("failing step: %v", err)
		}
		if err := insert(ctx, d, 4); err == nil {
			t.Error("a Tx after a failed one ran")
		}
		return nil // a caller that ignores the failure still gets it
	})
	var rb *db.RolledBack
	if !errors.As(err, &rb) || !errors.Is(err, bad) {
		t.Fatalf("want RolledBack(bad), got %v", err)
	}
	if n := count(t, d.Pool, ctx); n != 2 {
		t.Fatalf("after rollback: %d rows, want 2", n)
	}
	whole := errors.New("abort")
	if err := d.Atomic(ctx, func(ctx context.Context, _ pgx.Tx) error {
		if err := insert(ctx, d, 5); err != nil {
			return err
		}
		return whole
	}); !errors.Is(err, whole) {
		t.Fatal(err)
	}
	if n := count(t, d.Pool, ctx); n != 2 {
		t.Fatalf("after abort: %d rows, want 2", n)
	}
	if err := d.Atomic(ctx, func(ctx context.Context, _ pgx.Tx) error {
		return d.Atomic(ctx, func(context.Context, pgx.Tx) error { return nil })
	}); err == nil {
		t.Fatal("nested Atomic accepted")
	}
}

// A serialization failure inside a nested step restarts the whole Atomic call (its earlier
// steps included) and is counted by OnRetry with the operation's name.
func TestAtomicRestartsAsAWholeAndCountsRetries(t *testing.T) {
	d := atomicDB(t)
	var retries sync.Map
	d.OnRetry = func(ctx context.Context) {
		v, _ := retries.LoadOrStore(db.Operation(ctx), new(atomic.Int64))
		v.(*atomic.Int64).Add(1)
	}
	ctx := db.WithOperation(context.Background(), "bump")
	if _, err := d.Pool.Exec(ctx, "INSERT INTO items VALUES (0, 0)"); err != nil {
		t.Fatal(err)
	}
	const workers, each = 8, 20
	var wg sync.WaitGroup
	var runs atomic.Int64
	errs := make(chan error, workers*each)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				errs <- d.Atomic(ctx, func(ctx context.Context, _ pgx.Tx) error {
					runs.Add(1)
					return d.Tx(ctx, func(tx pgx.Tx) error {
						var n int64
						if err := tx.QueryRow(ctx, "SELECT n FROM items WHERE id = 0").Scan(&n); err != nil {
							return err
						}
						_, err := tx.Exec(ctx, "UPDATE items SET n = $1 WHERE id = 0", n+1)
						return err
					})
				})
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	var n int64
	if err := d.Pool.QueryRow(ctx, "SELECT n FROM items WHERE id = 0").Scan(&n); err != nil || n != workers*each {
		t.Fatalf("n = %d (%v), want %d: an increment was lost or doubled", n, err, workers*each)
	}
	v, ok := retries.Load("bump")
	got := int64(0)
	if ok {
		got = v.(*atomic.Int64).Load()
	}
	if got == 0 || got != runs.Load()-workers*each {
		t.Fatalf("retries counted %d, runs beyond the first %d", got, runs.Load()-workers*each)
	}
}

func TestExecAndReadCommitted(t *testing.T) {
	d := atomicDB(t)
	ctx := context.Background()
	if tag, err := d.Exec(ctx, "INSERT INTO items VALUES (1, 0)"); err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("%v %v", tag, err)
	}
	var level string
	if err := d.ReadCommitted(ctx, func(tx pgx.Tx) error {
		return tx.QueryRow(ctx, "SHOW transaction_isolation").Scan(&level)
	}); err != nil || level != "read committed" {
		t.Fatalf("isolation %q %v", level, err)
	}
	if err := d.Tx(ctx, func(tx pgx.Tx) error {
		return tx.QueryRow(ctx, "SHOW transaction_isolation").Scan(&level)
	}); err != nil || level != "serializable" {
		t.Fatalf("isolation %q %v", level, err)
	}
}

// Deferred statements run at the commit, in order, after the transaction's own statements; one
// that fails fails the commit and nothing of the transaction stays.
func TestDeferRunsAtCommit(t *testing.T) {
	d := atomicDB(t)
	ctx := context.Background()
	err := d.Tx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "INSERT INTO items VALUES (1, 0)"); err != nil {
			return err
		}
		if err := db.Defer(ctx, tx, "UPDATE items SET n = n + 10 WHERE id = $1", 1); err != nil {
			return err
		}
		if err := db.Defer(ctx, tx, "INSERT INTO items VALUES ($1, 0)", 2); err != nil {
			return err
		}
		var n int
		if err := tx.QueryRow(ctx, "SELECT n FROM items WHERE id = 1").Scan(&n); err != nil || n != 0 {
			t.Errorf("deferred statement ran early: n = %d %v", n, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := d.Pool.QueryRow(ctx, "SELECT n FROM items WHERE id = 1").Scan(&n); err != nil || n != 10 {
		t.Fatalf("after commit: n = %d %v", n, err)
	}
	if c := count(t, d.Pool, ctx); c != 2 {
		t.Fatalf("%d rows, want 2", c)
	}
	err = d.Tx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "INSERT INTO items VALUES (3, 0)"); err != nil {
			return err
		}
		return db.Defer(ctx, tx, "INSERT INTO items VALUES ($1, 0)", 1) // duplicate key at commit
	})
	if !db.IsUniqueViolation(err) {
		t.Fatalf("want the deferred statement's unique violation, got %v", err)
	}
	if c := count(t, d.Pool, ctx); c != 2 {
		t.Fatalf("%d rows after a failed commit, want 2", c)
	}
	// The connection went back clean: the pool still works.
	if err := insert(ctx, d, 4); err != nil {
		t.Fatal(err)
	}
}
