package dbtest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"slidecells/migrations"
)

// TestClonesAreMigrated: databases cloned from the template carry the whole schema and the
// migration version, and are independent of each other.
func TestClonesAreMigrated(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	urls := make([]string, 4)
	for i := range urls {
		wg.Go(func() { urls[i] = NewDatabase(t, migrations.FS, migrations.Cell) })
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("the clones were not made within a minute")
	}
	want := latestVersion(t, migrations.Cell)
	for i, u := range urls {
		c, err := pgx.Connect(ctx, u)
		if err != nil {
			t.Fatal(err)
		}
		var v int64
		var dirty bool
		if err := c.QueryRow(ctx, "SELECT version, dirty FROM schema_migrations").Scan(&v, &dirty); err != nil {
			t.Fatalf("clone %d: %v", i, err)
		}
		if v != want || dirty {
			t.Errorf("clone %d at version %d (dirty %v), want %d", i, v, dirty, want)
		}
		if i == 0 {
			if _, err := c.Exec(ctx, "CREATE TABLE only_in_first (id INT8 PRIMARY KEY)"); err != nil {
				t.Fatal(err)
			}
		} else {
			var n int
			if err := c.QueryRow(ctx, "SELECT count(*) FROM information_schema.tables WHERE table_name = 'only_in_first'").Scan(&n); err != nil || n != 0 {
				t.Errorf("clone %d sees another clone's table (%d, %v)", i, n, err)
			}
		}
		c.Close(ctx)
	}
}

// TestConcurrentTemplateBuildsAgree plays two test processes that both find no template and
// build one at the same moment: both must succeed and leave one complete template.
func TestConcurrentTemplateBuildsAgree(t *testing.T) {
	t.Parallel()
	admin := AdminURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	name := "tpl_race_" + time.Now().Format("150405000000")
	t.Cleanup(func() {
		_ = execAdmin(context.Background(), admin, "ALTER DATABASE "+name+" WITH ALLOW_CONNECTIONS true")
		_ = dropDatabase(context.Background(), admin, name)
	})
	errs := make(chan error, 3)
	for range 3 {
		go func() { errs <- buildTemplate(ctx, admin, name, migrations.FS, migrations.Directory) }()
	}
	for range 3 {
		select {
		case err := <-errs:
			if err != nil {
				t.Errorf("build: %v", err)
			}
		case <-ctx.Done():
			t.Fatal("builds did not finish within a minute")
		}
	}
	c, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var n int
	if err := c.QueryRow(ctx, "SELECT count(*) FROM pg_database WHERE datname = $1 OR datname LIKE $1 || '\\_b\\_%'", name).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("%d databases named %s or %s_b_*, want exactly the template", n, name, name)
	}
	if err := createDatabase(ctx, admin, name+"_clone", name); err != nil {
		t.Fatalf("clone the raced template: %v", err)
	}
	_ = dropDatabase(ctx, admin, name+"_clone")
}

func latestVersion(t *testing.T, dir string) int64 {
	t.Helper()
	entries, err := migrations.FS.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var v int64
	for _, e := range entries {
		var n int64
		for _, c := range e.Name() {
			if c < '0' || c > '9' {
				break
			}
			n = n*10 + int64(c-'0')
		}
		v = max(v, n)
	}
	return v
}
