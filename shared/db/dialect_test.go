package db_test

import (
	"io/fs"
	"regexp"
	"strings"
	"testing"

	"slidecells/migrations"
)

// forbidden lists constructs outside the dialect common to PostgreSQL and CockroachDB
// (DESIGN.md, "Databases").
var forbidden = []struct {
	name string
	re   *regexp.Regexp
}{
	{"advisory lock", regexp.MustCompile(`(?i)pg_advisory`)},
	{"LISTEN/NOTIFY", regexp.MustCompile(`(?i)\b(LISTEN|NOTIFY)\b`)},
	{"trigger", regexp.MustCompile(`(?i)CREATE\s+(OR\s+REPLACE\s+)?TRIGGER`)},
	{"stored procedure or function", regexp.MustCompile(`(?i)CREATE\s+(OR\s+REPLACE\s+)?(PROCEDURE|FUNCTION)`)},
	{"extension", regexp.MustCompile(`(?i)CREATE\s+EXTENSION`)},
	{"system column", regexp.MustCompile(`(?i)\b(xmin|xmax|ctid|oid)\b`)},
	{"serial type", regexp.MustCompile(`(?i)\b(SMALL|BIG)?SERIAL\b`)},
	{"sequence", regexp.MustCompile(`(?i)CREATE\s+SEQUENCE|nextval\s*\(`)},
	{"UPSERT", regexp.MustCompile(`(?i)\bUPSERT\b`)},
	{"UPDATE/DELETE with LIMIT", regexp.MustCompile(`(?is)\b(UPDATE|DELETE)\b[^;]*\bLIMIT\b`)},
	{"enum type", regexp.MustCompile(`(?i)CREATE\s+TYPE\s+\S+\s+AS\s+ENUM`)},
	{"SKIP LOCKED", regexp.MustCompile(`(?i)SKIP\s+LOCKED`)},
}

var (
	ddl = regexp.MustCompile(`(?i)^\s*(CREATE|ALTER|DROP)\b`)
	dml = regexp.MustCompile(`(?i)^\s*(INSERT|UPDATE|DELETE)\b`)
)

// TestMigrationsUseCommonDialect checks every embedded migration (it lives here, beside the
// transaction helper, so the migrations folder holds only SQL and its embedding).
func TestMigrationsUseCommonDialect(t *testing.T) {
	n := 0
	err := fs.WalkDir(migrations.FS, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".sql") {
			return err
		}
		n++
		b, err := migrations.FS.ReadFile(path)
		if err != nil {
			return err
		}
		sql := stripComments(string(b))
		for _, f := range forbidden {
			if f.re.MatchString(sql) {
				t.Errorf("%s: %s is not in the dialect common to PostgreSQL and CockroachDB", path, f.name)
			}
		}
		var hasDDL, hasDML bool
		for _, stmt := range strings.Split(sql, ";") {
			hasDDL = hasDDL || ddl.MatchString(stmt)
			hasDML = hasDML || dml.MatchString(stmt)
		}
		if hasDDL && hasDML {
			t.Errorf("%s mixes DDL and DML in one migration", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("no migrations found")
	}
}

// TestForbiddenPatternsCatch keeps the checker honest: each sample must be caught.
func TestForbiddenPatternsCatch(t *testing.T) {
	samples := []string{
		"SELECT pg_advisory_lock(1)", "LISTEN jobs", "CREATE TRIGGER t BEFORE INSERT",
		"CREATE FUNCTION f()", "CREATE EXTENSION pgcrypto", "SELECT xmax FROM t",
		"id BIGSERIAL PRIMARY KEY", "CREATE SEQUENCE s", "UPSERT INTO t VALUES (1)",
		"DELETE FROM t WHERE a = 1 LIMIT 10", "CREATE TYPE s AS ENUM ('a')",
		"SELECT 1 FOR UPDATE SKIP LOCKED",
	}
	for _, s := range samples {
		caught := false
		for _, f := range forbidden {
			caught = caught || f.re.MatchString(s)
		}
		if !caught {
			t.Errorf("not caught: %q", s)
		}
	}
}

func stripComments(s string) string {
	var b strings.Builder
	for _, line := range strings.Split(s, "\n") {
		if i := strings.Index(line, "--"); i >= 0 {
			line = line[:i]
		}
		b.WriteString(line)
		b.WriteByte('\n')
	}
	return b.String()
}
