// Package dbtest gives each test its own migrated database on one real PostgreSQL.
//
// `make test` starts one server and exports TEST_PG_URL (its admin URL); a test binary run on its
// own starts a private server instead, which dies with the binary.
//
// Migrating is the slow part, so it happens once per set of migrations and server: the first
// test that asks for a migrated database builds a template database named after the digest of
// the migration files (tpl_<digest>), and every test database is a clone of it (CREATE
// DATABASE … TEMPLATE …), which takes milliseconds. Test binaries of several packages run in
// parallel against one server: a template is built under a private name and renamed into place,
// so a tpl_<digest> that exists is complete; the loser of a race drops its copy and uses the
// winner's. Changing a migration changes the digest, so a stale template is never used.
// Templates stay on the server (it is thrown away with the `make test` run).
package dbtest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

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

// NewDatabase creates a database for the test and drops it when the test ends; it returns the
// database URL. With src not nil the database is a clone of the template migrated from dir of
// src (built on first use, see the package comment); with src nil it is empty.
func NewDatabase(t testing.TB, src fs.FS, dir string) string {
	t.Helper()
	admin := AdminURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	template := ""
	if src != nil {
		var err error
		if template, err = templateFor(ctx, admin, src, dir); err != nil {
			t.Fatalf("template database for %s: %v", dir, err)
		}
	}
	name := "t_" + strings.TrimPrefix(ids.New("x"), "x_")
	if err := createDatabase(ctx, admin, name, template); err != nil {
		t.Fatalf("create database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = dropDatabase(ctx, admin, name)
	})
	return URLFor(admin, name)
}

var (
	templatesMu sync.Mutex
	templates   = map[string]bool{} // admin URL + " " + template name: known to exist
)

// templateFor returns the name of the template migrated from dir of src on the server of
// admin, building it when no process has yet.
func templateFor(ctx context.Context, admin string, src fs.FS, dir string) (string, error) {
	digest, err := migrationsDigest(src, dir)
	if err != nil {
		return "", err
	}
	name := "tpl_" + digest
	// One builder per process; other processes are handled by the rename below.
	templatesMu.Lock()
	defer templatesMu.Unlock()
	if templates[admin+" "+name] {
		return name, nil
	}
	if exists, err := databaseExists(ctx, admin, name); err != nil {
		return "", err
	} else if !exists {
		if err := buildTemplate(ctx, admin, name, src, dir); err != nil {
			return "", err
		}
	}
	templates[admin+" "+name] = true
	return name, nil
}

// buildTemplate migrates a database under a private name and renames it to name. Only a
// complete template ever carries name; when another process renamed its copy first, ours is
// dropped.
func buildTemplate(ctx context.Context, admin, name string, src fs.FS, dir string) error {
	build := name + "_b_" + strings.TrimPrefix(ids.New("x"), "x_")
	if err := createDatabase(ctx, admin, build, ""); err != nil {
		return err
	}
	if err := db.Migrate(URLFor(admin, build), src, dir, false); err != nil {
		_ = dropDatabase(ctx, admin, build)
		return fmt.Errorf("migrate: %w", err)
	}
	err := execAdminRetry(ctx, admin, "ALTER DATABASE "+build+" RENAME TO "+name)
	if isDuplicateDatabase(err) {
		return dropDatabase(ctx, admin, build)
	}
	if err != nil {
		_ = dropDatabase(ctx, admin, build)
		return err
	}
	// Nobody connects to a template: a connection would make every clone fail ("source
	// database is being accessed by other users").
	return execAdmin(ctx, admin, "ALTER DATABASE "+name+" WITH ALLOW_CONNECTIONS false")
}

// migrationsDigest is a digest of the names and contents of the files in dir of src.
func migrationsDigest(src fs.FS, dir string) (string, error) {
	entries, err := fs.ReadDir(src, dir)
	if err != nil {
		return "", err
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		if !e.IsDir() {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00", dir)
	for _, n := range names {
		b, err := fs.ReadFile(src, path.Join(dir, n))
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", n, len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))[:24], nil
}

func createDatabase(ctx context.Context, admin, name, template string) error {
	q := "CREATE DATABASE " + name
	if template == "" {
		return execAdminRetry(ctx, admin, q)
	}
	q += " TEMPLATE " + template
	// FILE_COPY copies the template's files: about twice as fast as PostgreSQL 15's default
	// (WAL_LOG) for databases as small as ours. Older servers lack the option.
	if !noStrategy.Load() {
		err := execAdminRetry(ctx, admin, q+" STRATEGY FILE_COPY")
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "42601" {
			return err
		}
		noStrategy.Store(true)
	}
	return execAdminRetry(ctx, admin, q)
}

// noStrategy is set once the server turned CREATE DATABASE … STRATEGY down (before 15).
var noStrategy atomic.Bool

// execAdminRetry runs q, retrying while a database it names is still in use: the migration's
// session ends a moment after its client closed it, and PostgreSQL refuses to rename or clone
// a database while another session is connected to it.
func execAdminRetry(ctx context.Context, admin, q string) error {
	for attempt := 0; ; attempt++ {
		err := execAdmin(ctx, admin, q)
		if err == nil || !isObjectInUse(err) || attempt == 50 {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func dropDatabase(ctx context.Context, admin, name string) error {
	return execAdmin(ctx, admin, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
}

func databaseExists(ctx context.Context, admin, name string) (bool, error) {
	c, err := pgx.Connect(ctx, admin)
	if err != nil {
		return false, fmt.Errorf("connect test server: %w", err)
	}
	defer c.Close(ctx)
	var ok bool
	err = c.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&ok)
	return ok, err
}

func execAdmin(ctx context.Context, admin, q string) error {
	c, err := pgx.Connect(ctx, admin)
	if err != nil {
		return fmt.Errorf("connect test server: %w", err)
	}
	defer c.Close(ctx)
	_, err = c.Exec(ctx, q)
	return err
}

// isDuplicateDatabase reports a database name that exists. Two renames racing to one name can
// also fail on the catalog's unique index (23505 on pg_database_datname_index) instead of
// PostgreSQL's own check (42P04), when both pass the check before either commits.
func isDuplicateDatabase(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "42P04" || (pe.Code == "23505" && pe.ConstraintName == "pg_database_datname_index"))
}

func isObjectInUse(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "55006"
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

// Count returns what a SELECT count(*) query counts; a query that fails fails the test.
func Count(t testing.TB, d *db.DB, query string, args ...any) int {
	t.Helper()
	var n int
	if err := d.Pool.QueryRow(context.Background(), query, args...).Scan(&n); err != nil {
		t.Fatalf("count: %v", err)
	}
	return n
}
