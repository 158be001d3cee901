package db_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

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
