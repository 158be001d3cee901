package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"slidecells/cell/moves"
	"slidecells/shared/config"
	"slidecells/shared/directory"
	"slidecells/shared/failpoint"
	"slidecells/shared/ids"
)

// cellAccess is one cell's entry in the cells file: what a move needs to reach its data.
type cellAccess struct {
	DatabaseURL string `json:"database_url"`
	BlobURL     string `json:"blob_url"`
}

// loadCellsFile reads the cells file: a JSON object of cell ID → {database_url, blob_url}.
// Its values are credentials: nothing here repeats them in an error.
func loadCellsFile(path string) (map[string]cellAccess, error) {
	if path == "" {
		return nil, errors.New("moves need the cells' databases and blob stores: set --cells-file or CELLCTL_CELLS_FILE (see CELLS.md, \"Moving a workspace\")")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cells file: %w", err)
	}
	var m map[string]cellAccess
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("cells file %s: not a JSON object of cell ID to {\"database_url\", \"blob_url\"}", path)
	}
	for id, c := range m {
		if !ids.CellIDValid(id) {
			return nil, fmt.Errorf("cells file %s: %q is not a cell ID", path, id)
		}
		if c.DatabaseURL == "" || c.BlobURL == "" {
			return nil, fmt.Errorf("cells file %s: cell %s needs database_url and blob_url", path, id)
		}
	}
	return m, nil
}

// userinfo finds the credentials part of a URL, for redaction of error messages.
var userinfo = regexp.MustCompile(`://[^/@\s]+@`)

func redactURLs(s string) string { return userinfo.ReplaceAllString(s, "://[REDACTED]@") }

// moveOpts are the flags of the commands that run moves.
type moveOpts struct {
	grace, drainTimeout, lease time.Duration
}

func (o *moveOpts) flags(c *cobra.Command) {
	c.Flags().DurationVar(&o.grace, "grace", moves.DefaultGrace, "how long the source keeps its copy after the flip before the clean step deletes it (0: at once)")
	c.Flags().DurationVar(&o.drainTimeout, "drain-timeout", moves.DefaultDrainTimeout, "how long the drain step waits for the workspace's running jobs")
	c.Flags().DurationVar(&o.lease, "lease", moves.DefaultLease, "how long a move stays this cellctl's without renewal; another cellctl takes over a crashed one's moves after it")
}

// engine builds a move engine over the directory and the cells file; close closes the cells
// it opened.
func (a *app) engine(o moveOpts, out *progress) (*moves.Engine, func(), error) {
	path := a.cellsFile
	if path == "" {
		path = (&config.Loader{}).String("CELLCTL_CELLS_FILE", "", false)
	}
	access, err := loadCellsFile(path)
	if err != nil {
		return nil, nil, err
	}
	fp, err := failpoint.Parse(os.Getenv("CELLCTL_FAILPOINTS"))
	if err != nil {
		return nil, nil, fmt.Errorf("CELLCTL_FAILPOINTS: %w", err)
	}
	var mu sync.Mutex
	open := map[string]*moves.Endpoint{}
	grace := o.grace
	if grace == 0 {
		grace = -1 // the engine's "at once"
	}
	e := &moves.Engine{Dir: a.dir, Grace: grace, Runner: ids.New("run"), DrainTimeout: o.drainTimeout, Lease: o.lease,
		Progress: out.event,
		Open: func(ctx context.Context, id string) (*moves.Endpoint, error) {
			mu.Lock()
			defer mu.Unlock()
			if ep := open[id]; ep != nil {
				return ep, nil
			}
			c, ok := access[id]
			if !ok {
				return nil, fmt.Errorf("cell %s is not in the cells file", id)
			}
			ep, err := moves.OpenEndpoint(ctx, id, c.DatabaseURL, c.BlobURL)
			if err != nil {
				return nil, err
			}
			open[id] = ep
			return ep, nil
		}}
	if len(fp) > 0 {
		e.Failpoint = fp.Hit
	}
	return e, func() {
		mu.Lock()
		defer mu.Unlock()
		for _, ep := range open {
			ep.Close()
		}
	}, nil
}

func (a *app) moveCmd() *cobra.Command {
	var to string
	var o moveOpts
	c := &cobra.Command{Use: "move <workspace> --to <cell>", Short: "Move a workspace to another cell: plan, precopy, fence, drain, copy, verify, flip, clean",
		Long: `Moves a workspace with everything it owns (every row with its workspace_id, and its blobs) to another
cell. Writes to the workspace get 503 WORKSPACE_MOVING with Retry-After from the fence to the flip (a few
seconds at most); reads go on. The move is persisted in the directory: if cellctl or a cell dies, 'cellctl
moves resume <id>' finishes it and 'cellctl moves abort <id>' rolls it back (before its flip).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !ids.Valid(ids.Workspace, args[0]) {
				return fmt.Errorf("%q is not a workspace ID", args[0])
			}
			out := newProgress(a.out)
			e, closeCells, err := a.engine(o, out)
			if err != nil {
				return err
			}
			defer closeCells()
			m, err := e.Start(cmd.Context(), args[0], to, directory.ReasonManual)
			if err != nil {
				return err
			}
			fmt.Fprintf(a.out, "move %s: %s from %s to %s\n", m.ID, m.WorkspaceID, m.FromCell, m.ToCell)
			m, err = e.Run(cmd.Context(), m.ID)
			out.finish(m, err)
			return err
		}}
	c.Flags().StringVar(&to, "to", "", "target cell (required)")
	_ = c.MarkFlagRequired("to")
	o.flags(c)
	return c
}

func (a *app) movesCmd() *cobra.Command {
	var f directory.MoveFilter
	list := &cobra.Command{Use: "list", Short: "List moves, newest first",
		RunE: func(cmd *cobra.Command, _ []string) error {
			ms, err := a.dir.Moves(cmd.Context(), f)
			if err != nil {
				return err
			}
			rows := make([][]string, 0, len(ms))
			for _, m := range ms {
				window := "-"
				if w, ok := m.Timings["write_unavailable"]; ok {
					window = fmtMillis(w)
				}
				rows = append(rows, []string{m.ID, m.WorkspaceID, m.FromCell + "→" + m.ToCell, m.Step, m.Status, m.Reason, window, m.CreatedAt.UTC().Format(time.RFC3339)})
			}
			a.table("ID\tWORKSPACE\tCELLS\tSTEP\tSTATUS\tREASON\tWRITE-WINDOW\tCREATED", rows)
			return nil
		}}
	list.Flags().StringVar(&f.WorkspaceID, "workspace", "", "only this workspace's")
	list.Flags().StringVar(&f.Cell, "cell", "", "only moves from or to this cell")
	list.Flags().BoolVar(&f.Live, "live", false, "only moves that are not over")
	list.Flags().IntVar(&f.Limit, "limit", 100, "at most this many")
	show := &cobra.Command{Use: "show <move>", Short: "Show a move: its step, status, per-step timings, last error and verify report",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := a.dir.GetMove(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			a.showMove(m)
			return nil
		}}
	var o moveOpts
	resume := &cobra.Command{Use: "resume <move>", Short: "Run a move from where it stopped (after a crash, a failed step, or its grace period)",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			out := newProgress(a.out)
			e, closeCells, err := a.engine(o, out)
			if err != nil {
				return err
			}
			defer closeCells()
			m, err := e.Run(cmd.Context(), args[0])
			out.finish(m, err)
			return err
		}}
	o.flags(resume)
	var ao moveOpts
	abort := &cobra.Command{Use: "abort <move>", Short: "Roll a move back before its flip: the source keeps the workspace, the target's partial copy is deleted",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			out := newProgress(a.out)
			e, closeCells, err := a.engine(ao, out)
			if err != nil {
				return err
			}
			defer closeCells()
			m, err := e.Abort(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(a.out, "move %s aborted at step %s: %s stays on %s\n", m.ID, m.Step, m.WorkspaceID, m.FromCell)
			return nil
		}}
	ao.flags(abort)
	var co moveOpts
	var now bool
	clean := &cobra.Command{Use: "clean [<move>]", Short: "Delete the source's copy of moves whose grace period has passed (or of one move, --now: at once)",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			out := newProgress(a.out)
			e, closeCells, err := a.engine(co, out)
			if err != nil {
				return err
			}
			defer closeCells()
			var todo []directory.Move
			if len(args) == 1 {
				m, err := a.dir.GetMove(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				todo = append(todo, m)
			} else {
				live, err := a.dir.Moves(cmd.Context(), directory.MoveFilter{Live: true, Limit: 1000})
				if err != nil {
					return err
				}
				for _, m := range live {
					if m.Step == directory.StepClean && m.Status == directory.MoveActive && m.CleanAfter != nil && time.Now().After(*m.CleanAfter) {
						todo = append(todo, m)
					}
				}
			}
			var errs []error
			for _, m := range todo {
				if m.Step != directory.StepClean {
					errs = append(errs, fmt.Errorf("move %s is at step %s, not clean", m.ID, m.Step))
					continue
				}
				done, err := e.Clean(cmd.Context(), m.ID, now)
				out.finish(done, err)
				errs = append(errs, err)
			}
			fmt.Fprintf(a.out, "%d moves to clean\n", len(todo))
			return errors.Join(errs...)
		}}
	clean.Flags().BoolVar(&now, "now", false, "clean the named move without waiting for the rest of its grace period")
	co.flags(clean)
	return a.group("moves", "List, show, resume, abort and clean workspace moves", list, show, resume, abort, clean)
}

func fmtMillis(ms int64) string {
	return strconv.FormatFloat(float64(ms)/1000, 'f', 2, 64) + " s"
}

func (a *app) showMove(m directory.Move) {
	w := a.out
	fmt.Fprintf(w, "move        %s\nworkspace   %s\nfrom        %s (epoch %d)\nto          %s\nstep        %s\nstatus      %s\nreason      %s\ncreated     %s\n",
		m.ID, m.WorkspaceID, m.FromCell, m.FromEpoch, m.ToCell, m.Step, m.Status, m.Reason, m.CreatedAt.UTC().Format(time.RFC3339))
	if m.Runner != "" && m.RunnerUntil != nil {
		fmt.Fprintf(w, "runner      %s (lease until %s)\n", m.Runner, m.RunnerUntil.UTC().Format(time.RFC3339))
	}
	if m.CleanAfter != nil && m.Step == directory.StepClean {
		fmt.Fprintf(w, "clean after %s\n", m.CleanAfter.UTC().Format(time.RFC3339))
	}
	if m.FinishedAt != nil {
		fmt.Fprintf(w, "finished    %s\n", m.FinishedAt.UTC().Format(time.RFC3339))
	}
	if m.Error != "" {
		fmt.Fprintf(w, "error       %s\n", m.Error)
	}
	fmt.Fprintln(w, "timings:")
	for _, s := range directory.MoveSteps {
		if ms, ok := m.Timings[s]; ok {
			fmt.Fprintf(w, "  %-18s %s\n", s, fmtMillis(ms))
		}
	}
	if ms, ok := m.Timings["write_unavailable"]; ok {
		fmt.Fprintf(w, "  %-18s %s (fence → flip)\n", "write unavailable", fmtMillis(ms))
	}
	var r moves.Report
	if len(m.Report) > 2 && json.Unmarshal(m.Report, &r) == nil && len(r.Tables) > 0 {
		fmt.Fprintln(w, "verify (source / target):")
		names := make([]string, 0, len(r.Tables))
		for n := range r.Tables {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			p := r.Tables[n]
			mark := "ok"
			if p.Source != p.Target {
				mark = "DIFFERS"
			}
			fmt.Fprintf(w, "  %-22s %6d / %-6d rows  %.12s / %.12s  %s\n", n, p.Source.Rows, p.Target.Rows, p.Source.SHA256, p.Target.SHA256, mark)
		}
		fmt.Fprintf(w, "  %-22s %6d / %-6d blobs %d / %d bytes\n", "blobs", r.Blobs.Source.Blobs, r.Blobs.Target.Blobs, r.Blobs.Source.Bytes, r.Blobs.Target.Bytes)
	}
}

// progress prints a move's progress: on a terminal, a bar redrawn in place with the current
// step and its share done, and one line per finished step with its time; otherwise plain lines
// (at most one progress line a second per step).
type progress struct {
	mu       sync.Mutex
	w        io.Writer
	tty      bool
	lastLine time.Time
	drawn    bool
	prefix   bool // several moves at once: prefix lines with the workspace
}

func newProgress(w io.Writer) *progress {
	p := &progress{w: w}
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			p.tty = true
		}
	}
	return p
}

func stepIndex(s string) int {
	for i, x := range directory.MoveSteps {
		if x == s {
			return i
		}
	}
	return 0
}

func (p *progress) clear() {
	if p.tty && p.drawn {
		fmt.Fprint(p.w, "\r\033[K")
		p.drawn = false
	}
}

func (p *progress) line(ev moves.Event, format string, args ...any) {
	p.clear()
	if p.prefix {
		fmt.Fprintf(p.w, "%s ", ev.Move.WorkspaceID)
	}
	fmt.Fprintf(p.w, format+"\n", args...)
}

func (p *progress) event(ev moves.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch ev.Kind {
	case "start":
		if !p.tty {
			p.line(ev, "  %s …", ev.Step)
		} else {
			p.bar(ev)
		}
	case "done":
		p.line(ev, "  ✓ %-8s %8s", ev.Step, fmtMillis(ev.Elapsed.Milliseconds()))
	case "failed":
		p.line(ev, "  ✗ %-8s %8s  %s", ev.Step, fmtMillis(ev.Elapsed.Milliseconds()), redactURLs(ev.Note))
	case "wait":
		p.line(ev, "  … %s", redactURLs(ev.Note))
	case "progress":
		if ev.Note != "" {
			p.line(ev, "    %s", ev.Note)
			return
		}
		if p.tty {
			p.bar(ev)
			return
		}
		if time.Since(p.lastLine) >= time.Second && ev.Total > 0 {
			p.lastLine = time.Now()
			p.line(ev, "    %s %s", ev.Step, amount(ev))
		}
	}
}

func amount(ev moves.Event) string {
	if ev.Unit == "bytes" {
		return fmt.Sprintf("%.1f/%.1f MiB", float64(ev.Done)/(1<<20), float64(ev.Total)/(1<<20))
	}
	return fmt.Sprintf("%d/%d %s", ev.Done, ev.Total, ev.Unit)
}

// bar draws: [███████░░░░░░░] copy  4/8  1234/5678 rows
func (p *progress) bar(ev moves.Event) {
	const width = 24
	steps := len(directory.MoveSteps) - 1
	frac := float64(stepIndex(ev.Step)) / float64(steps)
	if ev.Total > 0 {
		frac += float64(ev.Done) / float64(ev.Total) / float64(steps)
	}
	n := min(width, int(frac*width))
	detail := ""
	if ev.Total > 0 {
		detail = amount(ev)
	}
	fmt.Fprintf(p.w, "\r\033[K[%s%s] %-8s %d/%d  %s", strings.Repeat("█", n), strings.Repeat("░", width-n), ev.Step, stepIndex(ev.Step)+1, steps, detail)
	p.drawn = true
}

// finish prints how a run ended.
func (p *progress) finish(m directory.Move, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clear()
	prefix := ""
	if p.prefix {
		prefix = m.WorkspaceID + " "
	}
	switch {
	case err != nil:
		fmt.Fprintf(p.w, "%smove %s stopped at step %s (%s): resume with 'cellctl moves resume %s' or roll back with 'cellctl moves abort %s'\n",
			prefix, m.ID, m.Step, m.Status, m.ID, m.ID)
	case m.Status == directory.MoveDone:
		window := ""
		if w, ok := m.Timings["write_unavailable"]; ok {
			window = ", writes unavailable for " + fmtMillis(w)
		}
		fmt.Fprintf(p.w, "%smove %s done: %s is on %s%s\n", prefix, m.ID, m.WorkspaceID, m.ToCell, window)
	case m.Step == directory.StepClean:
		window := ""
		if w, ok := m.Timings["write_unavailable"]; ok {
			window = " (writes were unavailable for " + fmtMillis(w) + ")"
		}
		fmt.Fprintf(p.w, "%smove %s flipped: %s is on %s%s; the source's copy is deleted after %s by 'cellctl moves clean'\n",
			prefix, m.ID, m.WorkspaceID, m.ToCell, window, m.CleanAfter.UTC().Format(time.RFC3339))
	}
}
