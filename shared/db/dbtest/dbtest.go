// Package dbtest gives each test its own migrated database on one real PostgreSQL.
//
// `make test` starts one server and exports TEST_PG_URL (its admin URL); a test binary run on its
// own starts a private server instead, which dies with the binary.
package dbtest

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"slidecells/shared/db"
	"slidecells/shared/ids"
	"slidecells/shared/pgserver"
)

var (
	once     sync.Once
	adminURL string
	startErr error
	server   *pgserver.Server
)

// AdminURL returns the URL of the maintenance database of the test server, starting a private
// server when TEST_PG_URL is not set.
func AdminURL(t testing.TB) string {
	t.Helper()
	once.Do(func() {
		if u := os.Getenv("TEST_PG_URL"); u != "" {
			adminURL = u
			return
		}
		dir, err := os.MkdirTemp("", "slidecells-pg-")
		if err != nil {
			startErr = err
			return
		}
		_ = os.Chmod(dir, 0o755)
		server, startErr = pgserver.Start(context.Background(), pgserver.Options{Dir: filepath.Join(dir, "pg")})
		if startErr == nil {
			adminURL = server.URL("postgres")
		}
	})
	if startErr != nil {
		t.Fatalf("test PostgreSQL: %v", startErr)
	}
	return adminURL
}

// URLFor returns adminURL with its database name replaced.
func URLFor(admin, dbname string) string {
	i := strings.LastIndex(admin, "/")
	q := ""
	if j := strings.Index(admin[i:], "?"); j >= 0 {
		q = admin[i+j:]
	}
	return admin[:i+1] + dbname + q
}

// NewDatabase creates an empty database for the test, migrated from dir of src when src is not
// nil, and drops it when the test ends. It returns the database URL.
func NewDatabase(t testing.TB, src fs.FS, dir string) string {
	t.Helper()
	admin := AdminURL(t)
	name := "t_" + strings.TrimPrefix(ids.New("x"), "x_")
	ctx := context.Background()
	c, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatalf("connect test server: %v", err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("create database: %v", err)
	}
	url := URLFor(admin, name)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, admin)
		if err != nil {
			return
		}
		defer c.Close(ctx)
		_, _ = c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	})
	if src != nil {
		if err := db.Migrate(url, src, dir, false); err != nil {
			t.Fatalf("migrate: %v", err)
		}
	}
	return url
}

// Open opens a pool on url and closes it when the test ends.
func Open(t testing.TB, url string) *db.DB {
	t.Helper()
	d, err := db.Open(context.Background(), url, db.Options{})
	if err != nil {
		t.Fatalf("open %v", err)
	}
	t.Cleanup(d.Close)
	return d
}
