package db

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"strings"

	"github.com/golang-migrate/migrate/v4"
	_ "github.com/golang-migrate/migrate/v4/database/cockroachdb" // production engine
	_ "github.com/golang-migrate/migrate/v4/database/pgx/v5"      // local engine
	"github.com/golang-migrate/migrate/v4/source/iofs"
)

// Migrate applies every pending migration in dir of src to the database at dbURL. Running it
// again is a no-op. cockroach selects golang-migrate's CockroachDB driver (which locks with a
// table, not an advisory lock).
func Migrate(dbURL string, src fs.FS, dir string, cockroach bool) error {
	source, err := iofs.New(src, dir)
	if err != nil {
		return fmt.Errorf("migrations %s: %w", dir, err)
	}
	u, err := url.Parse(dbURL)
	if err != nil {
		return errors.New("database url: cannot parse the connection string")
	}
	if cockroach {
		u.Scheme = "cockroachdb"
	} else {
		u.Scheme = "pgx5"
	}
	m, err := migrate.NewWithSourceInstance("iofs", source, u.String())
	if err != nil {
		return fmt.Errorf("migrate %s: %s", dir, redactURL(err.Error(), dbURL))
	}
	defer m.Close()
	if err := m.Up(); err != nil && !errors.Is(err, migrate.ErrNoChange) {
		return fmt.Errorf("migrate %s: %s", dir, redactURL(err.Error(), dbURL))
	}
	return nil
}

// redactURL removes the database password from msg in every form a driver may echo it: as
// given in the URL, decoded, and re-encoded.
func redactURL(msg, dbURL string) string {
	u, err := url.Parse(dbURL)
	if err != nil || u.User == nil {
		return msg
	}
	p, ok := u.User.Password()
	if !ok || p == "" {
		return msg
	}
	for _, form := range []string{u.User.String(), p, url.QueryEscape(p), url.PathEscape(p)} {
		if form != "" {
			msg = strings.ReplaceAll(msg, form, "[REDACTED]")
		}
	}
	return msg
}
