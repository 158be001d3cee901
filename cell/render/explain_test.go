package render

import (
	"context"
	"os"
	"testing"
	"time"
)

// TestExplainDispatch prints the plans of the dispatch statements over a backlog
// (RENDER_EXPLAIN=1 only: a tool for tuning, not a check).
func TestExplainDispatch(t *testing.T) {
	if os.Getenv("RENDER_EXPLAIN") == "" {
		t.Skip("RENDER_EXPLAIN=1 prints the dispatch plans")
	}
	f := setup(t, 8)
	ws := f.addWorkers(t, 16)
	c := f.coordinator(t, ws, func(cfg *Config) { cfg.QueueSize = 5000; cfg.WorkspaceQueueSize = 5000 })
	for i := range 4000 {
		f.submit(t, c, f.scopes[i%8], i, []Category{Interactive, Background}[i%2])
	}
	ctx := context.Background()
	_, _ = f.db.Pool.Exec(ctx, `ANALYZE`)
	now := time.Now().UTC()
	explain := func(label, sql string, args ...any) {
		// In a transaction rolled back afterwards: EXPLAIN ANALYZE runs the statement.
		tx, err := f.db.Pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback(ctx) }()
		rows, err := tx.Query(ctx, `EXPLAIN (ANALYZE, BUFFERS) `+sql, args...)
		if err != nil {
			t.Fatal(err)
		}
		t.Log(label)
		for rows.Next() {
			var l string
			_ = rows.Scan(&l)
			t.Log(l)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
	}
	explain("pick alone:", pickSQL, now, now.Add(-time.Hour), 16)
	explain("one dispatch statement:", dispatchSQL, now, now.Add(-time.Hour), 16, 16, testProfile, "att_explain", c.id, now.Add(time.Minute))
}
