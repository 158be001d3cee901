package jobs

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestClaimCostIndependentOfBacklog runs EXPLAIN (ANALYZE, BUFFERS) of both claim statements on
// backlogs of 5,000 and 50,000 jobs, in one workspace and spread over 100, with jobs running
// and, in the 100-workspace case, the workspace that holds the oldest half of the backlog at its
// cap (the head of the queue is all its jobs: the statement that walks the workspaces must find
// the others' jobs without reading the capped one's backlog). The pages a claim touches must
// not grow with the backlog: a tenfold backlog may cost at most a few more pages (index depth),
// not tenfold. Both the plans made for the arguments and the generic plans (what claimRC runs on
// PostgreSQL) are checked. JOBS_EXPLAIN=1 logs the plans (go test -v -run ClaimCost ./cell/jobs).
func TestClaimCostIndependentOfBacklog(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	pages := map[string]int{}
	for _, workspaces := range []int{1, 100} {
		for _, backlog := range []int{5000, 50000} {
			ws := []string{f.scope.WorkspaceID()}
			for i := 1; i < workspaces; i++ {
				ws = append(ws, fmt.Sprintf("ws_explain%03d", i))
			}
			exec := func(sql string, args ...any) {
				if _, err := f.q.DB.Pool.Exec(ctx, sql, args...); err != nil {
					t.Fatal(err)
				}
			}
			exec(`DELETE FROM mutation_jobs`)
			exec(`INSERT INTO tenancy (workspace_id, epoch, state) SELECT w, 1, 'active' FROM unnest($1::TEXT[]) AS w ON CONFLICT DO NOTHING`, ws)
			// The oldest half of the backlog is the first workspace's; the rest round-robin.
			exec(`INSERT INTO mutation_jobs (workspace_id, id, kind, owner_id, input, status, max_attempts, run_after, created_at, updated_at)
				SELECT CASE WHEN i < $3 / 2 THEN ($1::TEXT[])[1] ELSE ($1::TEXT[])[1 + i % $2] END, 'job_x' || lpad(i::TEXT, 7, '0'),
					'noop', 'usr_x', '{}', 'pending', 3, now() - INTERVAL '1 hour' + i * INTERVAL '1 microsecond', now(), now()
				FROM generate_series(0, $3 - 1) AS i`, ws, len(ws), backlog)
			// Two of the first workspace's jobs run (its cap, in the capped case), and one of each
			// of the next six workspaces'.
			exec(`UPDATE mutation_jobs SET status = 'running', lease_owner = 'wrk_x', lease_until = now() + INTERVAL '1 hour'
				WHERE id IN ('job_x0000000', 'job_x0000001')`)
			exec(`UPDATE mutation_jobs SET status = 'running', lease_owner = 'wrk_x', lease_until = now() + INTERVAL '1 hour'
				WHERE id IN (SELECT min(id) FROM mutation_jobs WHERE workspace_id = ANY($1) GROUP BY workspace_id)`, ws[1:min(7, len(ws))])
			exec(`VACUUM ANALYZE mutation_jobs`)
			caps := Caps{}
			if workspaces > 1 {
				caps.Default = 2
			}
			overrides, _ := json.Marshal(caps.Overrides)
			def := caps.Default
			if def <= 0 {
				def = math.MaxInt32
			}
			now := time.Now()
			// planned runs one statement's EXPLAIN and the checks every statement shares: no
			// sequential scan of the queue, and pages that do not grow with the backlog.
			planned := func(name, sql string, args []any, generic bool) (key, plan string, rows int) {
				t.Helper()
				plan, rows = explain(t, f, sql, args, generic)
				key = fmt.Sprintf("%s, %d workspaces", name, workspaces)
				if generic {
					key += ", generic plan"
				}
				n := buffers(t, plan)
				t.Logf("%s, backlog %d: %d rows, %d pages (shared hit+read)", key, backlog, rows, n)
				if os.Getenv("JOBS_EXPLAIN") != "" {
					t.Logf("plan:\n%s", plan)
				}
				if strings.Contains(plan, "Seq Scan on mutation_jobs") {
					t.Errorf("%s, backlog %d: a sequential scan of the queue:\n%s", key, backlog, plan)
				}
				// The backlog is 10× larger; an index one level deeper costs a page more per
				// probe (the walk probes each of 100 workspaces, and its page count at 5,000
				// varied from 327 to 504 between runs), so the bound is 2×, far below 10×.
				if small, ok := pages[key]; ok && n > 2*small+20 {
					t.Errorf("%s: %d pages at a backlog of %d, %d at 5,000: the cost grows with the backlog\n%s", key, n, backlog, small, plan)
				}
				pages[key] = n
				return key, plan, rows
			}
			for _, st := range []struct {
				name, sql string
				args      []any
			}{
				{"claimSQL", claimSQL, []any{"wrk_y", now.Add(time.Minute), now, 4, overrides, def, claimHead(4)}},
				{"claimByWorkspaceSQL", claimByWorkspaceSQL, []any{"wrk_y", now.Add(time.Minute), now, 4, overrides, def}},
			} {
				for _, generic := range []bool{false, true} {
					key, plan, claimed := planned(st.name, st.sql, st.args, generic)
					// Both statements claim 4 jobs (the head-only one in the capped case claims
					// fewer or none: the head is the capped workspace's).
					if want := 4; claimed != want && !(st.name == "claimSQL" && workspaces > 1) {
						t.Errorf("%s, backlog %d: claimed %d jobs, want %d", key, backlog, claimed, want)
					}
					if generic && !strings.Contains(plan, "$3") {
						t.Errorf("%s, backlog %d: not a generic plan (no parameter in it):\n%s", key, backlog, plan)
					}
				}
			}
			// The batched finish of four jobs, two of them running under the writer's lease:
			// one primary-key probe per job, whatever the backlog.
			var fin []finishing
			for i := range 4 {
				fin = append(fin, finishing{Job{WorkspaceID: ws[0], ID: fmt.Sprintf("job_x%07d", i)}, outcome{status: Succeeded}})
			}
			for _, generic := range []bool{false, true} {
				key, plan, _ := planned("finishBatchSQL", finishBatchSQL, finishBatchArgs("wrk_x", now, fin), generic)
				if first, _, _ := strings.Cut(plan, "\n"); !strings.Contains(first, "actual rows=2 ") {
					t.Errorf("%s, backlog %d: not the 2 running jobs of 4 written:\n%s", key, backlog, plan)
				}
			}
		}
	}
}

// explain runs EXPLAIN (ANALYZE, BUFFERS) of a claim (or a batched finish) in a transaction it rolls back, and counts
// the jobs the claim took. generic explains the generic plan of the prepared statement, what
// claimRC runs on PostgreSQL (plan_cache_mode = force_generic_plan); otherwise the plan made for
// the arguments' values.
func explain(t *testing.T, f *fixture, sql string, args []any, generic bool) (string, int) {
	t.Helper()
	ctx := context.Background()
	tx, err := f.q.DB.Pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	stmt := sql
	if generic {
		// EXECUTE takes its arguments as literals; the prepared statement outlives the
		// transaction, so it is deallocated before the rollback.
		if _, err := tx.Exec(ctx, genericPlans); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, `PREPARE claim_explained AS `+sql); err != nil {
			t.Fatal(err)
		}
		defer func() { _, _ = tx.Exec(ctx, `DEALLOCATE claim_explained`) }()
		lits := make([]string, len(args))
		for i, a := range args {
			switch v := a.(type) {
			case string:
				lits[i] = "'" + v + "'"
			case time.Time:
				lits[i] = "'" + v.Format(time.RFC3339Nano) + "'"
			case []byte:
				lits[i] = "'" + string(v) + "'"
			case []string: // plain words only
				lits[i] = `'{"` + strings.Join(v, `","`) + `"}'`
			case []*string: // NULLs only
				lits[i] = "'{" + strings.TrimSuffix(strings.Repeat("NULL,", len(v)), ",") + "}'"
			case []time.Time:
				var ts []string
				for _, x := range v {
					ts = append(ts, `"`+x.Format(time.RFC3339Nano)+`"`)
				}
				lits[i] = "'{" + strings.Join(ts, ",") + "}'"
			default:
				lits[i] = fmt.Sprint(v)
			}
		}
		stmt, args = `EXECUTE claim_explained(`+strings.Join(lits, ", ")+`)`, nil
	}
	rows, err := tx.Query(ctx, `EXPLAIN (ANALYZE, BUFFERS, COSTS OFF, TIMING OFF) `+stmt, args...)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	var claimed int
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM mutation_jobs WHERE status = 'running' AND lease_owner = 'wrk_y'`).Scan(&claimed); err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines, "\n"), claimed
}

var buffersRe = regexp.MustCompile(`Buffers: shared(?: hit=(\d+))?(?: read=(\d+))?`)

// buffers is the statement's total of shared pages (its root node's Buffers line).
func buffers(t *testing.T, plan string) int {
	t.Helper()
	m := buffersRe.FindStringSubmatch(plan)
	if m == nil {
		t.Fatalf("no Buffers in the plan:\n%s", plan)
	}
	hit, _ := strconv.Atoi(m[1])
	read, _ := strconv.Atoi(m[2])
	return hit + read
}
