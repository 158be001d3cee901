package db_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"slidecells/migrations"
)

// forbidden lists constructs outside the dialect common to PostgreSQL and CockroachDB
// (DESIGN.md, "Databases").
var forbidden = []struct {
	name string
	re   matcher
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
	{"UPDATE/DELETE with LIMIT", matchFunc(updateDeleteLimit)},
	{"enum type", regexp.MustCompile(`(?i)CREATE\s+TYPE\s+\S+\s+AS\s+ENUM`)},
	{"SKIP LOCKED", matchFunc(skipLockedOutsideQueues)},
}

// queueTables may be read with FOR UPDATE SKIP LOCKED (CockroachDB ≥ 23.1 and PostgreSQL both
// have it): their claims scan small partial indexes of live rows only, which is what DESIGN.md
// allows ("avoid SKIP LOCKED over large churned indexes"). Anywhere else it is refused.
var queueTables = regexp.MustCompile(`(?i)\bFROM\s+(mutation_jobs)\s+WHERE\s+status\s*=`)

var skipLocked = regexp.MustCompile(`(?i)SKIP\s+LOCKED`)

func skipLockedOutsideQueues(sql string) bool {
	return skipLocked.MatchString(sql) && !queueTables.MatchString(sql)
}

type matcher interface{ MatchString(string) bool }

type matchFunc func(string) bool

func (f matchFunc) MatchString(s string) bool { return f(s) }

var (
	writeStmt = regexp.MustCompile(`(?i)\b(FOR\s+)?(UPDATE|DELETE)\b`)
	word      = regexp.MustCompile(`(?i)\bLIMIT\b|[();]`)
)

// updateDeleteLimit finds UPDATE … LIMIT and DELETE … LIMIT: a LIMIT at the statement's own
// level, not one inside a subquery (DELETE … WHERE id IN (SELECT … LIMIT n) is common to both
// engines) and not SELECT … FOR UPDATE.
func updateDeleteLimit(sql string) bool {
	for _, m := range writeStmt.FindAllStringSubmatchIndex(sql, -1) {
		if m[2] >= 0 { // FOR UPDATE: a locking SELECT
			continue
		}
		depth := 0
	scan:
		for _, w := range word.FindAllStringIndex(sql[m[1]:], -1) {
			switch tok := sql[m[1]+w[0] : m[1]+w[1]]; tok {
			case "(":
				depth++
			case ")":
				if depth--; depth < 0 {
					break scan // the end of the subquery the statement sits in
				}
			case ";":
				break scan
			default: // LIMIT
				if depth == 0 {
					return true
				}
			}
		}
	}
	return false
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

// sqlLike picks Go string literals that hold SQL: an upper-case statement or clause keyword,
// as the code writes its queries (messages and identifiers do not shout).
var sqlLike = regexp.MustCompile(`\b(SELECT|INSERT\s+INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM|UPSERT\s+INTO|RETURNING|ON\s+CONFLICT|SKIP\s+LOCKED)\b|\b(CREATE|ALTER|DROP|LISTEN|NOTIFY)\s+[A-Za-z_]`)

// TestGoSQLUsesCommonDialect applies the forbidden-construct checks to the SQL inside Go code:
// every string literal (or constant concatenation of literals) of every non-test Go file in the
// module that looks like SQL. Test files are left out: they may hold PostgreSQL-only SQL for
// the test server, and the checker's own samples.
func TestGoSQLUsesCommonDialect(t *testing.T) {
	root := moduleRoot(t)
	files, queries := 0, 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "bin" || d.Name() == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		files++
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		for _, p := range checkGoSQL(t, rel, src) {
			queries++
			if p != "" {
				t.Error(p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d SQL literals in %d Go files", queries, files)
	if files < 50 || queries < 50 {
		t.Fatalf("checked %d queries in %d Go files: the walk missed the code", queries, files)
	}
}

// TestGoSQLCheckerCatchesPlantedConstructs plants forbidden constructs in Go source the way the
// code writes queries (raw strings, concatenations) and expects each to be reported, and a
// clean file to pass.
func TestGoSQLCheckerCatchesPlantedConstructs(t *testing.T) {
	bad := "package store\n\nconst q = `SELECT id FROM jobs ORDER BY id FOR UPDATE` + \" SKIP LOCKED\"\n\n" +
		"func purge() string {\n\treturn `DELETE FROM idempotency_keys\n\t\tWHERE expires_at < $1 LIMIT 500`\n}\n\n" +
		"var lock = \"SELECT pg_advisory_xact_lock($1)\"\n\nvar up = `UPSERT INTO t (a) VALUES ($1)`\n\n" +
		"var sys = `SELECT xmin FROM projects WHERE id = $1`\n\n" +
		"func ddl() []string {\n\treturn []string{\"CREATE TRIGGER t BEFORE INSERT ON x\", \"LISTEN jobs\"}\n}\n"
	var got []string
	for _, p := range checkGoSQL(t, "planted.go", []byte(bad)) {
		if p != "" {
			got = append(got, p)
		}
	}
	for _, want := range []string{"planted.go:3: SKIP LOCKED", "planted.go:6: UPDATE/DELETE with LIMIT",
		"planted.go:10: advisory lock", "planted.go:12: UPSERT", "planted.go:14: system column",
		"planted.go:17: trigger", "planted.go:17: LISTEN/NOTIFY"} {
		found := false
		for _, g := range got {
			found = found || strings.HasPrefix(g, want)
		}
		if !found {
			t.Errorf("not reported: %s (reports: %q)", want, got)
		}
	}
	clean := "package store\n\nconst q = `DELETE FROM k WHERE (a, b) IN (SELECT a, b FROM k WHERE t < $1 LIMIT $2)`\n\n" +
		"var sel = \"SELECT id FROM t WHERE id = $1 FOR UPDATE\"\nvar msg = \"cannot update: limit reached\"\n"
	for _, p := range checkGoSQL(t, "clean.go", []byte(clean)) {
		if p != "" {
			t.Errorf("clean source reported: %s", p)
		}
	}
}

// checkGoSQL returns one entry per SQL-looking literal of a Go file: "" when it is in the
// common dialect, else "file:line: construct …".
func checkGoSQL(t *testing.T, name string, src []byte) []string {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution)
	if err != nil {
		t.Fatalf("parse %s: %v", name, err)
	}
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		e, ok := n.(ast.Expr)
		if !ok {
			return true
		}
		s, ok := stringConstant(e)
		if !ok {
			return true
		}
		if sqlLike.MatchString(s) {
			sql := stripComments(s)
			problems := ""
			for _, fb := range forbidden {
				if fb.re.MatchString(sql) {
					problems += fb.name + "; "
				}
			}
			if problems != "" {
				out = append(out, fmt.Sprintf("%s:%d: %sis not in the dialect common to PostgreSQL and CockroachDB: %q",
					name, fset.Position(e.Pos()).Line, problems, oneLine(s)))
			} else {
				out = append(out, "")
			}
		}
		return false // a concatenation is checked whole, not again in parts
	})
	return out
}

// stringConstant folds a string literal, or a + of string literals, into its value.
func stringConstant(e ast.Expr) (string, bool) {
	switch e := e.(type) {
	case *ast.BasicLit:
		if e.Kind != token.STRING {
			return "", false
		}
		s, err := strconv.Unquote(e.Value)
		return s, err == nil
	case *ast.ParenExpr:
		return stringConstant(e.X)
	case *ast.BinaryExpr:
		if e.Op != token.ADD {
			return "", false
		}
		a, ok1 := stringConstant(e.X)
		b, ok2 := stringConstant(e.Y)
		return a + b, ok1 && ok2
	}
	return "", false
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 120 {
		s = s[:120] + "…"
	}
	return s
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found above the test's folder")
		}
		dir = parent
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
