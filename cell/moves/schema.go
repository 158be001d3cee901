package moves

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5"

	"slidecells/shared/db"
)

// CellOwned lists the tables that have a workspace_id column but belong to the cell, not to the
// workspace: a move never copies them. tenancy is the cell's record of which workspaces it
// serves, which the move itself writes on both sides. Every other table with a workspace_id
// column is copied, found by itself in the schema (ReadSchema); a test fails when one cannot be.
var CellOwned = []string{"tenancy"}

// Column is one column of a workspace-owned table.
type Column struct {
	Name string
	// Type is the SQL type a text value is cast to when it is written ("jsonb", "text[]").
	Type string
}

// Table is one workspace-owned table: its columns in order, its primary key (workspace_id
// first) and the tables its foreign keys reference.
type Table struct {
	Name    string
	Columns []Column
	Key     []string
	Parents []string
}

// Schema is the set of workspace-owned tables of a cell database, parents before children.
type Schema struct {
	Tables []Table
	// Version is the cell database's migration version.
	Version int64
}

// Table returns the table named name.
func (s Schema) Table(name string) (Table, bool) {
	for _, t := range s.Tables {
		if t.Name == name {
			return t, true
		}
	}
	return Table{}, false
}

// Signature describes the tables and columns, for comparing two cells' schemas.
func (s Schema) Signature() string {
	var b strings.Builder
	fmt.Fprintf(&b, "v%d", s.Version)
	for _, t := range s.Tables {
		b.WriteString(";" + t.Name + "(")
		for i, c := range t.Columns {
			if i > 0 {
				b.WriteString(",")
			}
			b.WriteString(c.Name + " " + c.Type)
		}
		b.WriteString(")")
	}
	return b.String()
}

// textRows reads the rows of a query whose columns are all text.
func textRows(ctx context.Context, q db.Querier, sql string) ([][]string, error) {
	rows, err := q.Query(ctx, sql)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) ([]string, error) {
		vals := make([]string, len(r.FieldDescriptions()))
		dst := make([]any, len(vals))
		for i := range vals {
			dst[i] = &vals[i]
		}
		return vals, r.Scan(dst...)
	})
}

// ReadSchema finds every workspace-owned table of the database q is connected to, from
// information_schema (PostgreSQL and CockroachDB both have it). A table with a workspace_id
// column that is not in CellOwned must have a primary key starting with workspace_id and
// columns of types a move can carry; otherwise ReadSchema fails and no move starts.
func ReadSchema(ctx context.Context, q db.Querier) (Schema, error) {
	var s Schema
	if err := q.QueryRow(ctx, `SELECT version FROM schema_migrations`).Scan(&s.Version); err != nil {
		return s, fmt.Errorf("schema version: %w", err)
	}
	cols, err := textRows(ctx, q, `
		SELECT c.table_name, c.column_name, c.data_type, c.udt_name
		FROM information_schema.columns c
		JOIN information_schema.tables t ON t.table_schema = c.table_schema AND t.table_name = c.table_name
		WHERE c.table_schema = current_schema() AND t.table_type = 'BASE TABLE'
		AND c.table_name IN (SELECT table_name FROM information_schema.columns WHERE table_schema = current_schema() AND column_name = 'workspace_id')
		ORDER BY c.table_name, c.ordinal_position`)
	if err != nil {
		return s, err
	}
	byName := map[string]*Table{}
	var names []string
	for _, r := range cols {
		table, col, dataType, udt := r[0], r[1], r[2], r[3]
		if slices.Contains(CellOwned, table) || strings.HasPrefix(col, "crdb_internal_") {
			continue
		}
		typ, ok := castType(dataType, udt)
		if !ok {
			return s, fmt.Errorf("table %s, column %s: type %s (%s) cannot be moved; teach cell/moves castType", table, col, dataType, udt)
		}
		t := byName[table]
		if t == nil {
			t = &Table{Name: table}
			byName[table] = t
			names = append(names, table)
		}
		t.Columns = append(t.Columns, Column{Name: col, Type: typ})
	}
	keys, err := textRows(ctx, q, `
		SELECT kcu.table_name, kcu.column_name
		FROM information_schema.table_constraints tc
		JOIN information_schema.key_column_usage kcu
		  ON kcu.constraint_schema = tc.constraint_schema AND kcu.constraint_name = tc.constraint_name AND kcu.table_name = tc.table_name
		WHERE tc.table_schema = current_schema() AND tc.constraint_type = 'PRIMARY KEY'
		ORDER BY kcu.table_name, kcu.ordinal_position`)
	if err != nil {
		return s, err
	}
	for _, r := range keys {
		if t := byName[r[0]]; t != nil {
			t.Key = append(t.Key, r[1])
		}
	}
	refs, err := textRows(ctx, q, `
		SELECT DISTINCT tc.table_name, ccu.table_name
		FROM information_schema.table_constraints tc
		JOIN information_schema.constraint_column_usage ccu
		  ON ccu.constraint_schema = tc.constraint_schema AND ccu.constraint_name = tc.constraint_name
		WHERE tc.table_schema = current_schema() AND tc.constraint_type = 'FOREIGN KEY'`)
	if err != nil {
		return s, err
	}
	for _, r := range refs {
		child, parent := r[0], r[1]
		if t := byName[child]; t != nil && child != parent {
			if byName[parent] == nil {
				return s, fmt.Errorf("table %s references %s, which has no workspace_id: a move cannot carry it", child, parent)
			}
			t.Parents = append(t.Parents, parent)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		t := byName[n]
		if len(t.Key) == 0 || t.Key[0] != "workspace_id" {
			return s, fmt.Errorf("table %s: its primary key must start with workspace_id for a move to carry it (key %v)", n, t.Key)
		}
	}
	order, err := topo(names, byName)
	if err != nil {
		return s, err
	}
	for _, n := range order {
		s.Tables = append(s.Tables, *byName[n])
	}
	return s, nil
}

// topo orders tables so that every table comes after the tables it references.
func topo(names []string, byName map[string]*Table) ([]string, error) {
	var out []string
	state := map[string]int{} // 1 visiting, 2 done
	var visit func(n string) error
	visit = func(n string) error {
		switch state[n] {
		case 1:
			return fmt.Errorf("tables reference each other in a cycle through %s: a move cannot order them", n)
		case 2:
			return nil
		}
		state[n] = 1
		parents := slices.Clone(byName[n].Parents)
		sort.Strings(parents)
		for _, p := range parents {
			if err := visit(p); err != nil {
				return err
			}
		}
		state[n] = 2
		out = append(out, n)
		return nil
	}
	for _, n := range names {
		if err := visit(n); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// castTypes map the information_schema types a move carries to the type a text value is cast
// to. Types whose text form does not survive a round trip exactly are left out (none is used
// today).
var castTypes = map[string]string{
	"text": "text", "character varying": "text", "varchar": "text", "string": "text",
	"bigint": "int8", "int8": "int8", "integer": "int4", "int4": "int4", "int": "int4", "smallint": "int2", "int2": "int2",
	"boolean": "bool", "bool": "bool", "jsonb": "jsonb", "bytea": "bytea", "bytes": "bytea",
	"timestamp with time zone": "timestamptz", "timestamptz": "timestamptz", "date": "date", "uuid": "uuid",
	"numeric": "numeric", "decimal": "numeric",
}

// castType maps an information_schema type (an array's element type in udt) to the type a text
// value is cast to.
func castType(dataType, udt string) (string, bool) {
	if strings.EqualFold(dataType, "array") {
		elem, ok := castTypes[strings.ToLower(strings.TrimPrefix(udt, "_"))]
		return elem + "[]", ok
	}
	t, ok := castTypes[strings.ToLower(dataType)]
	return t, ok
}
