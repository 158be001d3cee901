package db_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"slidecells/migrations"
	"slidecells/shared/db"
	"slidecells/shared/db/dbtest"
)

// TestTxRetriesSerializationFailures runs conflicting read-modify-write transactions under
// serializable isolation; without a restart on a fresh snapshot (or with a commit failure
// swallowed) increments would be lost or the run would fail.
func TestTxRetriesSerializationFailures(t *testing.T) {
	d := dbtest.Open(t, dbtest.NewDatabase(t, nil, ""))
	ctx := context.Background()
	if _, err := d.Pool.Exec(ctx, "CREATE TABLE counter (id INT8 PRIMARY KEY, n INT8 NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Pool.Exec(ctx, "INSERT INTO counter VALUES (1, 0)"); err != nil {
		t.Fatal(err)
	}
	const workers, each = 8, 25
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				errs <- d.Tx(ctx, func(tx pgx.Tx) error {
					var n int64
					if err := tx.QueryRow(ctx, "SELECT n FROM counter WHERE id = 1").Scan(&n); err != nil {
						return err
					}
					_, err := tx.Exec(ctx, "UPDATE counter SET n = $1 WHERE id = 1", n+1)
					return err
				})
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		t.Fatal("the transactions did not finish within 2 minutes")
	}
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("tx: %v", err)
		}
	}
	var n int64
	if err := d.Pool.QueryRow(ctx, "SELECT n FROM counter WHERE id = 1").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != workers*each {
		t.Fatalf("counter = %d, want %d (lost updates)", n, workers*each)
	}
}

func TestMigrateErrorsHideThePassword(t *testing.T) {
	url := "postgres://app:p%40ss%2Fw0rd@127.0.0.1:1/x?sslmode=disable"
	err := db.Migrate(url, migrations.FS, migrations.Cell, false)
	if err == nil {
		t.Fatal("migrating against a closed port succeeded")
	}
	for _, secret := range []string{"p@ss/w0rd", "p%40ss%2Fw0rd", "p%40ss/w0rd"} {
		if strings.Contains(err.Error(), secret) {
			t.Fatalf("error shows the password: %v", err)
		}
	}
}

// TestPingDoesNotQueueBehindThePool holds every pool connection, as a cell under overload does,
// and pings: Ping has a connection of its own, so it answers where a ping through the pool waits
// out its deadline. It then replaces its connection after the server closed it.
func TestPingDoesNotQueueBehindThePool(t *testing.T) {
	d := dbtest.Open(t, dbtest.NewDatabase(t, nil, ""))
	ctx := context.Background()
	var held []*pgxpool.Conn
	for range d.Pool.Config().MaxConns {
		c, err := d.Pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if err := d.Pool.Ping(short); err == nil {
		t.Fatal("a ping through the exhausted pool answered: the test holds no connection")
	}
	if err := d.Ping(ctx); err != nil {
		t.Fatalf("Ping with every pool connection busy: %v", err)
	}

	// The server ends Ping's session (a restart, an idle timeout): the next Ping reconnects.
	var pid int
	if err := held[0].QueryRow(ctx, `SELECT pid FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid() AND state = 'idle'
		AND pid NOT IN (SELECT pid FROM pg_stat_activity WHERE backend_type <> 'client backend')
		ORDER BY backend_start DESC LIMIT 1`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	var killed bool
	if err := held[0].QueryRow(ctx, "SELECT pg_terminate_backend($1)", pid).Scan(&killed); err != nil || !killed {
		t.Fatalf("terminate Ping's session %d: %v %v", pid, killed, err)
	}
	if err := d.Ping(ctx); err != nil {
		t.Fatalf("Ping after its session was ended: %v", err)
	}
	for _, c := range held {
		c.Release()
	}
}
