package render

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestExplainDispatch prints the plans of the dispatch statements over a backlog of 4,000
// requests, half of them already dispatched and released (the dead index entries a busy
// queue leaves behind until vacuum), as the dispatch transaction runs them: prepared, with
// PostgreSQL's generic plan (RENDER_EXPLAIN=1 only: a tool for tuning, not a check).
// RENDER_EXPLAIN_CHURN sets how many requests are dispatched and released first (2,000).
func TestExplainDispatch(t *testing.T) {
	if os.Getenv("RENDER_EXPLAIN") == "" {
		t.Skip("RENDER_EXPLAIN=1 prints the dispatch plans")
	}
	churn := 2000
	if n, err := strconv.Atoi(os.Getenv("RENDER_EXPLAIN_CHURN")); err == nil && n >= 0 {
		churn = n
	}
	f := setup(t, 8)
	ws := f.addWorkers(t, 16)
	c := f.coordinator(t, ws, func(cfg *Config) {
		cfg.QueueSize, cfg.WorkspaceQueueSize = 5000, 5000
		cfg.RequestTimeout = time.Hour // none expires while a slow host submits the backlog
	})
	for i := range 4000 {
		f.submit(t, c, f.scopes[i%8], i, []Category{Interactive, Background}[i%2])
	}
	ctx := context.Background()
	_, _ = f.db.Pool.Exec(ctx, `ANALYZE`)
	for done := 0; done < churn; {
		rs, _, err := c.dispatchBatch(ctx, dispatchBatchMax)
		if err != nil || len(rs) == 0 {
			t.Fatalf("churn: %d dispatched, then %v", done, err)
		}
		done += len(rs)
		f.releaseAll(t)
	}
	now := time.Now().UTC()
	explain := func(label, sql string, args ...any) {
		// In a transaction rolled back afterwards: EXPLAIN ANALYZE runs the statement.
		tx, err := f.db.Pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback(ctx) }()
		if _, err := tx.Exec(ctx, `SET LOCAL plan_cache_mode = force_generic_plan`); err != nil {
			t.Fatal(err)
		}
		name := "explained_" + strconv.Itoa(len(label)) // PREPARE outlives the transaction
		if _, err := tx.Exec(ctx, `PREPARE `+name+` AS `+sql); err != nil {
			t.Fatal(err)
		}
		// EXPLAIN takes no parameters: the values go in as literals.
		params := ""
		for i, a := range args {
			if i > 0 {
				params += ", "
			}
			switch v := a.(type) {
			case time.Time:
				params += "'" + v.Format(time.RFC3339Nano) + "'::TIMESTAMPTZ"
			case int:
				params += strconv.Itoa(v)
			case string:
				params += "'" + strings.ReplaceAll(v, "'", "''") + "'"
			default:
				t.Fatalf("explain: a parameter of type %T", a)
			}
		}
		rows, err := tx.Query(ctx, `EXPLAIN (ANALYZE, BUFFERS) EXECUTE `+name+` (`+params+`)`)
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
