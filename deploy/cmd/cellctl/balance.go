package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"sync"

	"github.com/spf13/cobra"

	"slidecells/cell/moves"
	"slidecells/shared/directory"
)

// wsLoad is one workspace as the balancer sees it.
type wsLoad struct {
	ID     string
	Cell   string
	Bytes  int64 // stored bytes: its assets
	Pinned bool
	Moving bool
}

// cellLoad is one cell the balancer may move workspaces to or from.
type cellLoad struct {
	ID  string
	Max int64 // 0: unlimited
}

// plannedMove is one move a plan proposes.
type plannedMove struct {
	Workspace string
	From, To  string
	Bytes     int64
}

// imbalance scores how uneven the load is: the sum over cells of the squared relative
// deviation from the mean of the workspace count and of the stored bytes.
func imbalance(count map[string]float64, bytes map[string]float64, cells []cellLoad) float64 {
	var tc, tb float64
	for _, c := range cells {
		tc += count[c.ID]
		tb += bytes[c.ID]
	}
	mc, mb := tc/float64(len(cells)), tb/float64(len(cells))
	var s float64
	for _, c := range cells {
		if mc > 0 {
			d := (count[c.ID] - mc) / mc
			s += d * d
		}
		if mb > 0 {
			d := (bytes[c.ID] - mb) / mb
			s += d * d
		}
	}
	return s
}

// planRebalance proposes moves among cells that even out the workspace count and the stored
// bytes: greedily, the move that lowers the imbalance most, until none lowers it or maxMoves
// are planned. Pinned and moving workspaces stay; a cell at its capacity takes none.
func planRebalance(cells []cellLoad, wss []wsLoad, maxMoves int) []plannedMove {
	if len(cells) < 2 {
		return nil
	}
	in := map[string]bool{}
	count, bytes := map[string]float64{}, map[string]float64{}
	for _, c := range cells {
		in[c.ID] = true
	}
	where := map[string]string{}
	for _, w := range wss {
		if in[w.Cell] {
			count[w.Cell]++
			bytes[w.Cell] += float64(w.Bytes)
		}
		where[w.ID] = w.Cell
	}
	var plan []plannedMove
	moved := map[string]bool{}
	for len(plan) < maxMoves {
		best, bestScore := -1, imbalance(count, bytes, cells)
		var bestTo string
		for i, w := range wss {
			if w.Pinned || w.Moving || moved[w.ID] || !in[w.Cell] {
				continue
			}
			for _, c := range cells {
				if c.ID == w.Cell || (c.Max > 0 && count[c.ID] >= float64(c.Max)) {
					continue
				}
				count[w.Cell]--
				bytes[w.Cell] -= float64(w.Bytes)
				count[c.ID]++
				bytes[c.ID] += float64(w.Bytes)
				if s := imbalance(count, bytes, cells); s < bestScore-1e-9 {
					best, bestScore, bestTo = i, s, c.ID
				}
				count[c.ID]--
				bytes[c.ID] -= float64(w.Bytes)
				count[w.Cell]++
				bytes[w.Cell] += float64(w.Bytes)
			}
		}
		if best < 0 {
			break
		}
		w := wss[best]
		count[w.Cell]--
		bytes[w.Cell] -= float64(w.Bytes)
		count[bestTo]++
		bytes[bestTo] += float64(w.Bytes)
		moved[w.ID] = true
		plan = append(plan, plannedMove{Workspace: w.ID, From: w.Cell, To: bestTo, Bytes: w.Bytes})
	}
	return plan
}

// loads reads the placements and each active cell's stored bytes per workspace (its assets).
func (a *app) loads(ctx context.Context, e *moves.Engine) ([]cellLoad, []wsLoad, error) {
	cells, err := a.dir.CellsWithCounts(ctx)
	if err != nil {
		return nil, nil, err
	}
	ps, err := a.dir.Placements(ctx, "")
	if err != nil {
		return nil, nil, err
	}
	var active []cellLoad
	bytes := map[string]int64{}
	for _, c := range cells {
		if c.State != "active" {
			continue
		}
		active = append(active, cellLoad{ID: c.ID, Max: c.MaxWorkspaces})
		ep, err := e.Open(ctx, c.ID)
		if err != nil {
			return nil, nil, err
		}
		rows, err := ep.DB.Pool.Query(ctx, `SELECT workspace_id, COALESCE(sum(byte_size), 0)::INT8 FROM assets GROUP BY workspace_id`)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", c.ID, err)
		}
		for rows.Next() {
			var ws string
			var n int64
			if err := rows.Scan(&ws, &n); err != nil {
				rows.Close()
				return nil, nil, err
			}
			bytes[ws] = n
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, nil, err
		}
	}
	wss := make([]wsLoad, 0, len(ps))
	for _, p := range ps {
		wss = append(wss, wsLoad{ID: p.WorkspaceID, Cell: p.CellID, Bytes: bytes[p.WorkspaceID], Pinned: p.Pinned, Moving: p.State != "active"})
	}
	return active, wss, nil
}

// runMoves runs planned moves, at most concurrency at once, and reports each. Moves already
// recorded (a resumed drain) are given by ID in resume.
func runMoves(ctx context.Context, e *moves.Engine, out *progress, plan []plannedMove, resume []string, reason string, concurrency int) (done int, errs []error) {
	type job struct {
		id   string
		plan plannedMove
	}
	var jobs []job
	for _, id := range resume {
		jobs = append(jobs, job{id: id})
	}
	for _, p := range plan {
		jobs = append(jobs, job{plan: p})
	}
	var mu sync.Mutex
	sem := make(chan struct{}, max(1, concurrency))
	var wg sync.WaitGroup
	for _, j := range jobs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			id := j.id
			if id == "" {
				m, err := e.Start(ctx, j.plan.Workspace, j.plan.To, reason)
				if err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("%s: %w", j.plan.Workspace, err))
					mu.Unlock()
					return
				}
				id = m.ID
			}
			m, err := e.Run(ctx, id)
			out.finish(m, err)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			done++
		}()
	}
	wg.Wait()
	return done, errs
}

func (a *app) drainCmd() *cobra.Command {
	var o moveOpts
	var concurrency int
	c := &cobra.Command{Use: "drain <cell>", Short: "Move every unpinned workspace off a cell (it becomes draining and takes no new ones); run again to resume",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			cell := args[0]
			if _, err := a.dir.Cell(ctx, cell); err != nil {
				return fmt.Errorf("cell %s: %w", cell, err)
			}
			out := newProgress(a.out)
			out.prefix = true
			e, closeCells, err := a.engine(o, out)
			if err != nil {
				return err
			}
			defer closeCells()
			if err := a.dir.SetCellState(ctx, cell, "draining"); err != nil {
				return err
			}
			// Moves from this cell that are not over and not waiting for their grace period
			// are resumed; a second drain of the same cell picks up where the first stopped.
			live, err := a.dir.Moves(ctx, directory.MoveFilter{Cell: cell, Live: true, Limit: 10000})
			if err != nil {
				return err
			}
			var resume []string
			moving := map[string]bool{}
			for _, m := range live {
				moving[m.WorkspaceID] = true
				if m.FromCell == cell && m.Step != directory.StepClean && m.Status != directory.MoveAborting {
					resume = append(resume, m.ID)
				}
			}
			cells, wss, err := a.loads(ctx, e)
			if err != nil {
				return err
			}
			plan, pinned := planDrain(cell, cells, wss, moving)
			fmt.Fprintf(a.out, "drain %s: %d workspaces to move, %d moves to resume, %d pinned stay\n", cell, len(plan), len(resume), len(pinned))
			for _, p := range plan {
				if p.To == "" {
					return fmt.Errorf("no active cell has room for %s: add a cell or raise a capacity (cellctl cells set)", p.Workspace)
				}
			}
			done, errs := runMoves(ctx, e, out, plan, resume, directory.ReasonDrain, concurrency)
			for _, w := range pinned {
				fmt.Fprintf(a.out, "%s is pinned: it stays on %s (cellctl workspaces unpin, then drain again, or move it explicitly)\n", w, cell)
			}
			fmt.Fprintf(a.out, "drain %s: %d moved, %d failed\n", cell, done, len(errs))
			if len(errs) > 0 {
				return fmt.Errorf("drain %s unfinished (run it again to resume): %w", cell, errors.Join(errs...))
			}
			return nil
		}}
	c.Flags().IntVar(&concurrency, "concurrency", 2, "moves at once")
	o.flags(c)
	return c
}

// planDrain sends every unpinned, not moving workspace of cell to the active cell that has the
// fewest workspaces (counting those planned) and room; it returns the pinned ones too.
func planDrain(cell string, cells []cellLoad, wss []wsLoad, moving map[string]bool) ([]plannedMove, []string) {
	count := map[string]int64{}
	for _, w := range wss {
		count[w.Cell]++
	}
	var plan []plannedMove
	var pinned []string
	sort.Slice(wss, func(i, j int) bool {
		return wss[i].Bytes > wss[j].Bytes || wss[i].Bytes == wss[j].Bytes && wss[i].ID < wss[j].ID
	})
	for _, w := range wss {
		if w.Cell != cell || moving[w.ID] || w.Moving {
			continue
		}
		if w.Pinned {
			pinned = append(pinned, w.ID)
			continue
		}
		to := ""
		for _, c := range cells {
			if c.ID == cell || (c.Max > 0 && count[c.ID] >= c.Max) {
				continue
			}
			if to == "" || count[c.ID] < count[to] || count[c.ID] == count[to] && c.ID < to {
				to = c.ID
			}
		}
		if to != "" {
			count[to]++
		}
		plan = append(plan, plannedMove{Workspace: w.ID, From: cell, To: to, Bytes: w.Bytes})
	}
	sort.Strings(pinned)
	return plan, pinned
}

func (a *app) rebalanceCmd() *cobra.Command {
	var o moveOpts
	var dry, apply bool
	var concurrency, maxMoves int
	c := &cobra.Command{Use: "rebalance --dry-run|--apply", Short: "Propose (--dry-run) or run (--apply) moves that even out workspace counts and stored bytes over the active cells; pinned workspaces stay",
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dry == apply {
				return errors.New("give exactly one of --dry-run and --apply")
			}
			ctx := cmd.Context()
			out := newProgress(a.out)
			out.prefix = true
			e, closeCells, err := a.engine(o, out)
			if err != nil {
				return err
			}
			defer closeCells()
			cells, wss, err := a.loads(ctx, e)
			if err != nil {
				return err
			}
			plan := planRebalance(cells, wss, maxMoves)
			rows := make([][]string, 0, len(plan))
			for _, p := range plan {
				rows = append(rows, []string{p.Workspace, p.From, p.To, strconv.FormatInt(p.Bytes, 10)})
			}
			a.table("WORKSPACE\tFROM\tTO\tBYTES", rows)
			before, after := loadTable(cells, wss, nil), loadTable(cells, wss, plan)
			for _, c := range cells {
				fmt.Fprintf(a.out, "%s: %s → %s\n", c.ID, before[c.ID], after[c.ID])
			}
			if dry || len(plan) == 0 {
				fmt.Fprintf(a.out, "%d moves proposed\n", len(plan))
				return nil
			}
			done, errs := runMoves(ctx, e, out, plan, nil, directory.ReasonRebalance, concurrency)
			fmt.Fprintf(a.out, "rebalance: %d moved, %d failed\n", done, len(errs))
			return errors.Join(errs...)
		}}
	c.Flags().BoolVar(&dry, "dry-run", false, "only print the moves")
	c.Flags().BoolVar(&apply, "apply", false, "run the moves")
	c.Flags().IntVar(&concurrency, "concurrency", 2, "moves at once")
	c.Flags().IntVar(&maxMoves, "max-moves", 20, "at most this many moves")
	o.flags(c)
	return c
}

// loadTable describes each cell's workspace count and stored bytes after a plan.
func loadTable(cells []cellLoad, wss []wsLoad, plan []plannedMove) map[string]string {
	to := map[string]string{}
	for _, p := range plan {
		to[p.Workspace] = p.To
	}
	count, bytes := map[string]int{}, map[string]int64{}
	for _, w := range wss {
		c := w.Cell
		if t, ok := to[w.ID]; ok {
			c = t
		}
		count[c]++
		bytes[c] += w.Bytes
	}
	out := map[string]string{}
	for _, c := range cells {
		out[c.ID] = fmt.Sprintf("%d workspaces, %.1f MiB", count[c.ID], math.Round(float64(bytes[c.ID])/(1<<20)*10)/10)
	}
	return out
}
