package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"slidecells/cell/render"
	"slidecells/shared/config"
	"slidecells/shared/db"
)

// renderersOpts name the cell whose renderers the commands look at: a cell of the cells file
// (--cell) or a cell database URL (--cell-database-url, CELL_DATABASE_URL).
type renderersOpts struct {
	cell, dbURL string
	jsonOut     bool
	all         bool
	epoch       string
	operator    string
	reason      string
	confirm     bool
}

// openCell opens the cell database the flags name. The procedure works on the database alone
// (as every coordinator replica does), so it also works while the cell's replicas are down.
func (a *app) openCell(ctx context.Context, o *renderersOpts) (*db.DB, error) {
	url := o.dbURL
	if url == "" && o.cell != "" {
		path := a.cellsFile
		if path == "" {
			path = (&config.Loader{}).String("CELLCTL_CELLS_FILE", "", false)
		}
		access, err := loadCellsFile(path)
		if err != nil {
			return nil, err
		}
		c, ok := access[o.cell]
		if !ok {
			return nil, fmt.Errorf("cell %s is not in the cells file", o.cell)
		}
		url = c.DatabaseURL
	}
	if url == "" {
		url = (&config.Loader{}).String("CELL_DATABASE_URL", "", false)
	}
	if url == "" {
		return nil, errors.New("no cell: set --cell (with --cells-file) or --cell-database-url or CELL_DATABASE_URL")
	}
	octx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	d, err := db.Open(octx, url, db.Options{MaxConns: 2})
	if err != nil {
		return nil, fmt.Errorf("cell database: %w", err)
	}
	return d, nil
}

func (a *app) renderersCmd() *cobra.Command {
	o := &renderersOpts{}
	root := &cobra.Command{Use: "renderers", Short: "See and act on a cell's renderers: state, epoch, host, quarantine, the attempts they hold", Args: cobra.NoArgs}
	root.PersistentFlags().StringVar(&o.cell, "cell", "", "cell ID in the cells file (--cells-file or $CELLCTL_CELLS_FILE)")
	root.PersistentFlags().StringVar(&o.dbURL, "cell-database-url", "", "the cell's database URL (default: $CELL_DATABASE_URL)")
	root.PersistentFlags().BoolVar(&o.jsonOut, "json", false, "print JSON")
	run := func(fn func(cmd *cobra.Command, op *render.Operator, args []string) error) func(*cobra.Command, []string) error {
		return func(cmd *cobra.Command, args []string) error {
			d, err := a.openCell(cmd.Context(), o)
			if err != nil {
				return err
			}
			defer d.Close()
			return fn(cmd, render.NewOperator(d, zap.NewNop()), args)
		}
	}
	list := &cobra.Command{Use: "list", Short: "List renderer epochs: state, epoch, host, quarantine reason, occupied and unknown attempts", Args: cobra.NoArgs,
		RunE: run(func(cmd *cobra.Command, op *render.Operator, _ []string) error {
			eps, err := op.List(cmd.Context(), o.all)
			if err != nil {
				return err
			}
			if o.jsonOut {
				return a.printJSON(append([]render.RendererEpoch{}, eps...))
			}
			var rows [][]string
			for _, e := range eps {
				rows = append(rows, []string{e.WorkerID, e.State, e.Epoch, shortBoot(e.BootID), strconv.Itoa(e.Occupied), strconv.Itoa(e.Unknown),
					ageOf(e.HeartbeatAt), dash(quarantineReason(e))})
			}
			a.table("WORKER\tSTATE\tEPOCH\tHOST (BOOT)\tOCCUPIED\tUNKNOWN\tHEARTBEAT\tQUARANTINE / DETAIL", rows)
			return nil
		})}
	list.Flags().BoolVar(&o.all, "all", false, "include retired epochs that hold nothing")
	actionFlags := func(c *cobra.Command) {
		c.Flags().StringVar(&o.epoch, "epoch", "", "only this epoch of the renderer (default: every epoch)")
		c.Flags().StringVar(&o.operator, "operator", "", "who acts (recorded; required)")
		c.Flags().StringVar(&o.reason, "reason", "", "why, with the evidence (recorded; required)")
		_ = c.MarkFlagRequired("operator")
		_ = c.MarkFlagRequired("reason")
	}
	act := func(name string, do func(*render.Operator, context.Context, render.Action) (render.ActionResult, error)) func(*cobra.Command, *render.Operator, []string) error {
		return func(cmd *cobra.Command, op *render.Operator, args []string) error {
			in := render.Action{WorkerID: args[0], Epoch: o.epoch, Operator: o.operator, Reason: o.reason}
			if name != "unquarantine" && !o.confirm {
				pending, err := op.Pending(cmd.Context(), in)
				if err != nil {
					return err
				}
				return fmt.Errorf("nothing changed: %s frees the capacity of %d unknown attempt(s) of %s (%s); verify that the node that ran them is terminated, then repeat with --confirm-terminated",
					name, len(pending), in.WorkerID, dash(strings.Join(pending, ", ")))
			}
			res, err := do(op, cmd.Context(), in)
			if err != nil {
				return err
			}
			if o.jsonOut {
				return a.printJSON(res)
			}
			fmt.Fprintf(a.out, "%s %s: %d attempt(s) released, epoch(s) changed: %s (recorded as %s)\n", name, in.WorkerID, len(res.Released),
				dash(strings.Join(res.Epochs, ", ")), res.ActionID)
			return nil
		}
	}
	release := &cobra.Command{Use: "release <renderer>", Short: "Release a dead node's unknown attempts after you verified its termination (recorded)", Args: cobra.ExactArgs(1),
		RunE: run(act("release", (*render.Operator).Release))}
	retire := &cobra.Command{Use: "retire <renderer>", Short: "Retire a decommissioned renderer's epochs and release their unknown attempts (recorded)", Args: cobra.ExactArgs(1),
		RunE: run(act("retire", (*render.Operator).Retire))}
	unq := &cobra.Command{Use: "unquarantine <renderer>", Short: "Lift a renderer's quarantine; the next passing probe makes it ready (recorded)", Args: cobra.ExactArgs(1),
		RunE: run(act("unquarantine", (*render.Operator).Unquarantine))}
	for _, c := range []*cobra.Command{release, retire, unq} {
		actionFlags(c)
	}
	for _, c := range []*cobra.Command{release, retire} {
		c.Flags().BoolVar(&o.confirm, "confirm-terminated", false, "confirm that the node that ran the attempts is terminated (without it nothing changes)")
	}
	var limit int
	log := &cobra.Command{Use: "actions", Short: "Show the recorded operator and probe actions on renderers, newest first", Args: cobra.NoArgs,
		RunE: run(func(cmd *cobra.Command, op *render.Operator, _ []string) error {
			acts, err := op.Actions(cmd.Context(), limit)
			if err != nil {
				return err
			}
			if o.jsonOut {
				return a.printJSON(append([]render.OperatorAction{}, acts...))
			}
			var rows [][]string
			for _, x := range acts {
				rows = append(rows, []string{x.At.UTC().Format(time.RFC3339), x.Action, x.WorkerID, x.Epoch, x.Operator, strconv.Itoa(len(x.Released)), x.Reason})
			}
			a.table("AT\tACTION\tWORKER\tEPOCH\tOPERATOR\tRELEASED\tREASON", rows)
			return nil
		})}
	log.Flags().IntVar(&limit, "limit", 50, "how many (1 to 1000)")
	root.AddCommand(list, release, retire, unq, log)
	return root
}

func (a *app) printJSON(v any) error {
	enc := json.NewEncoder(a.out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func quarantineReason(e render.RendererEpoch) string {
	if e.Detail == "" {
		return ""
	}
	if e.Quarantined && e.QuarantinedAt != nil {
		return "since " + e.QuarantinedAt.UTC().Format(time.RFC3339) + ": " + e.Detail
	}
	return e.Detail
}

func shortBoot(b string) string {
	if len(b) > 8 {
		return b[:8]
	}
	return dash(b)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func ageOf(t time.Time) string {
	return time.Since(t).Truncate(time.Second).String() + " ago"
}
