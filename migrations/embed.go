// Package migrations embeds the SQL of the directory database (directory/) and of a cell
// database (cell/). Files are applied in order by shared/db.Migrate at start-up.
//
// Every file must stay in the dialect common to PostgreSQL and CockroachDB; dialect_test.go
// fails when a forbidden construct appears.
package migrations

import "embed"

// FS holds both migration folders.
//
//go:embed directory/*.sql cell/*.sql
var FS embed.FS

// Folder names inside FS.
const (
	Directory = "directory"
	Cell      = "cell"
)
