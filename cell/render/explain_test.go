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
	rows, err := f.db.Pool.Query(ctx, `EXPLAIN ANALYZE `+pickSQL, now, now.Add(-time.Hour), 16)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var l string
		_ = rows.Scan(&l)
		t.Log(l)
	}
	rows.Close()
}
