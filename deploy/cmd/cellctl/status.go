package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"slidecells/shared/directory"
)

// statusTimeout bounds each read of a cell's health and metrics, so a hung cell costs the
// command seconds, not minutes.
const statusTimeout = 5 * time.Second

// maxStatusBody bounds what cellctl status reads from a cell.
const maxStatusBody = 4 << 20

// fleetStatus is what `cellctl status --json` prints.
type fleetStatus struct {
	// Healthy is false when a cell that is not marked down is unreachable or its database check
	// fails; the command then exits non-zero.
	Healthy bool         `json:"healthy"`
	Cells   []cellStatus `json:"cells"`
	// Moves are the moves not over (active, failed, aborting), oldest first.
	Moves []moveStatus `json:"moves"`
}

type cellStatus struct {
	ID            string `json:"id"`
	URL           string `json:"url"`
	State         string `json:"state"` // active, draining, down
	Workspaces    int64  `json:"workspaces"`
	MaxWorkspaces int64  `json:"max_workspaces"` // 0: unlimited
	Pinned        int    `json:"pinned"`
	// Health is ok, degraded (a component is not ok: see Checks), unhealthy (database) or
	// unreachable (no answer from the cell; Error says why).
	Health  string                 `json:"health"`
	Healthy bool                   `json:"healthy"`
	Error   string                 `json:"error,omitempty"`
	Checks  map[string]healthCheck `json:"checks,omitempty"` // database, directory, render
	Jobs    *jobsStatus            `json:"jobs,omitempty"`
	Renders *rendersStatus         `json:"renders,omitempty"`
}

type healthCheck struct {
	Status string `json:"status"`
	Detail string `json:"detail,omitempty"`
}

type jobsStatus struct {
	Pending              int     `json:"pending"`
	Running              int     `json:"running"`
	OldestPendingSeconds float64 `json:"oldest_pending_seconds"`
}

// rendersStatus is read from the cell's /metrics (the gauges the render alerts watch).
type rendersStatus struct {
	Dispatchable           int     `json:"dispatchable"`
	Ready                  int     `json:"ready"`
	Quarantined            int     `json:"quarantined"`
	Mismatch               int     `json:"mismatch"`
	Unready                int     `json:"unready"`
	Waiting                int     `json:"waiting"`
	Executing              int     `json:"executing"`
	UnknownAttempts        int     `json:"unknown_attempts"`
	OldestWaitingSeconds   float64 `json:"oldest_waiting_seconds"`
	OldestExecutingSeconds float64 `json:"oldest_executing_seconds"`
}

type moveStatus struct {
	ID          string    `json:"id"`
	WorkspaceID string    `json:"workspace_id"`
	From        string    `json:"from"`
	To          string    `json:"to"`
	Step        string    `json:"step"`
	Status      string    `json:"status"`
	Reason      string    `json:"reason"`
	Error       string    `json:"error,omitempty"`
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`
}

func (a *app) statusCmd() *cobra.Command {
	var asJSON bool
	c := &cobra.Command{Use: "status", Short: "One screen for the fleet: cells with state, capacity, workspaces and component health, moves in progress; exits 1 when a cell is unhealthy",
		Args: cobra.NoArgs, PersistentPreRunE: a.open,
		PersistentPostRun: func(*cobra.Command, []string) {
			if a.dir != nil {
				a.dir.Close()
			}
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := collectStatus(cmd.Context(), a.dir, &http.Client{Timeout: statusTimeout})
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(a.out)
				enc.SetIndent("", "  ")
				if err := enc.Encode(st); err != nil {
					return err
				}
			} else {
				a.printStatus(st)
			}
			if !st.Healthy {
				var bad []string
				for _, c := range st.Cells {
					if !c.Healthy {
						bad = append(bad, c.ID+" ("+c.Health+")")
					}
				}
				return fmt.Errorf("unhealthy cells: %s", strings.Join(bad, ", "))
			}
			return nil
		}}
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON (for scripts) instead of a table")
	return c
}

// collectStatus reads the directory, then every cell's health and metrics at once.
func collectStatus(ctx context.Context, d *directory.Directory, hc *http.Client) (*fleetStatus, error) {
	cells, err := d.CellsWithCounts(ctx)
	if err != nil {
		return nil, err
	}
	moves, err := d.Moves(ctx, directory.MoveFilter{Live: true, Limit: 1000})
	if err != nil {
		return nil, err
	}
	st := &fleetStatus{Healthy: true, Cells: make([]cellStatus, len(cells)), Moves: []moveStatus{}}
	var wg sync.WaitGroup
	for i, c := range cells {
		cs := &st.Cells[i]
		*cs = cellStatus{ID: c.ID, URL: c.InternalURL, State: c.State, Workspaces: c.WorkspaceCount, MaxWorkspaces: c.MaxWorkspaces}
		pl, err := d.Placements(ctx, c.ID)
		if err != nil {
			return nil, err
		}
		for _, p := range pl {
			if p.Pinned {
				cs.Pinned++
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			probeCell(ctx, hc, cs)
		}()
	}
	wg.Wait()
	for _, c := range st.Cells {
		if !c.Healthy {
			st.Healthy = false
		}
	}
	for _, m := range moves {
		st.Moves = append(st.Moves, moveStatus{ID: m.ID, WorkspaceID: m.WorkspaceID, From: m.FromCell, To: m.ToCell, Step: m.Step,
			Status: m.Status, Reason: m.Reason, Error: m.Error, CreatedAt: m.CreatedAt, UpdatedAt: m.UpdatedAt})
	}
	sort.Slice(st.Moves, func(i, j int) bool { return st.Moves[i].CreatedAt.Before(st.Moves[j].CreatedAt) })
	return st, nil
}

// probeCell reads the cell's public health (GET /api/v1/system/health) and its /metrics. A
// cell marked down counts as healthy whatever it answers: it is meant to be out.
func probeCell(ctx context.Context, hc *http.Client, cs *cellStatus) {
	base := strings.TrimRight(cs.URL, "/")
	var h struct {
		Status string                 `json:"status"`
		Checks map[string]healthCheck `json:"checks"`
		Jobs   *jobsStatus            `json:"jobs"`
	}
	err := getJSON(ctx, hc, base+"/api/v1/system/health", &h)
	switch {
	case err != nil:
		cs.Health, cs.Error = "unreachable", err.Error()
	case h.Checks["database"].Status != "ok":
		cs.Health, cs.Checks, cs.Jobs = "unhealthy", h.Checks, h.Jobs
	default:
		cs.Health, cs.Checks, cs.Jobs = h.Status, h.Checks, h.Jobs
	}
	cs.Healthy = cs.State == "down" || cs.Health == "ok" || cs.Health == "degraded"
	if err != nil {
		return
	}
	if m, err := getMetrics(ctx, hc, base+"/metrics"); err == nil {
		if _, ok := m["cell_render_workers_dispatchable"]; ok {
			cs.Renders = &rendersStatus{
				Dispatchable: int(m["cell_render_workers_dispatchable"]), Ready: int(m[`cell_render_workers{state="ready"}`]),
				Quarantined: int(m[`cell_render_workers{state="quarantined"}`]), Mismatch: int(m[`cell_render_workers{state="mismatch"}`]),
				Unready: int(m[`cell_render_workers{state="unready"}`]), Waiting: int(m[`cell_render_requests{state="waiting"}`]),
				Executing: int(m[`cell_render_requests{state="executing"}`]), UnknownAttempts: int(m["cell_render_attempts_unknown"]),
				OldestWaitingSeconds: m[`cell_render_oldest_seconds{state="waiting"}`], OldestExecutingSeconds: m[`cell_render_oldest_seconds{state="executing"}`],
			}
		}
	}
}

func get(ctx context.Context, hc *http.Client, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		var ue interface{ Unwrap() error }
		if errors.As(err, &ue) && ue.Unwrap() != nil {
			return nil, ue.Unwrap() // without the URL: the table shows it already
		}
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxStatusBody))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	return b, nil
}

func getJSON(ctx context.Context, hc *http.Client, url string, v any) error {
	b, err := get(ctx, hc, url)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// getMetrics reads a Prometheus text exposition into values by "name" or "name{labels}", as
// the exposition spells them.
func getMetrics(ctx context.Context, hc *http.Client, url string) (map[string]float64, error) {
	b, err := get(ctx, hc, url)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			out[line[:i]] = v
		}
	}
	return out, sc.Err()
}

func (a *app) printStatus(st *fleetStatus) {
	rows := make([][]string, 0, len(st.Cells))
	for _, c := range st.Cells {
		capacity := "-"
		if c.MaxWorkspaces > 0 {
			capacity = strconv.FormatInt(c.MaxWorkspaces, 10)
		}
		check := func(name string) string {
			if h, ok := c.Checks[name]; ok {
				return h.Status
			}
			return "-"
		}
		jobs, renders, renderers := "-", "-", check("render")
		if c.Jobs != nil {
			jobs = fmt.Sprintf("%d/%d oldest %s", c.Jobs.Pending, c.Jobs.Running, age(c.Jobs.OldestPendingSeconds))
		}
		if r := c.Renders; r != nil {
			renderers = fmt.Sprintf("%s %d ready, %d quarantined", check("render"), r.Ready, r.Quarantined)
			if r.Mismatch > 0 {
				renderers += fmt.Sprintf(", %d mismatch", r.Mismatch)
			}
			renders = fmt.Sprintf("%d/%d oldest %s", r.Waiting, r.Executing, age(r.OldestExecutingSeconds))
		}
		health := c.Health
		if c.Error != "" {
			health += ": " + c.Error
		}
		rows = append(rows, []string{c.ID, c.State, strconv.FormatInt(c.Workspaces, 10), capacity, strconv.Itoa(c.Pinned),
			check("database"), check("directory"), jobs, renderers, renders, health})
	}
	a.table("CELL\tSTATE\tWORKSPACES\tMAX\tPINNED\tDB\tDIRECTORY\tJOBS pending/running\tRENDERERS\tRENDERS waiting/executing\tHEALTH", rows)
	fmt.Fprintln(a.out)
	if len(st.Moves) == 0 {
		fmt.Fprintln(a.out, "no moves in progress")
	} else {
		mrows := make([][]string, 0, len(st.Moves))
		for _, m := range st.Moves {
			mrows = append(mrows, []string{m.ID, m.WorkspaceID, m.From + " -> " + m.To, m.Step, m.Status, age(time.Since(m.UpdatedAt).Seconds()), m.Error})
		}
		a.table("MOVE\tWORKSPACE\tCELLS\tSTEP\tSTATUS\tAT STEP FOR\tERROR", mrows)
	}
	fmt.Fprintln(a.out)
	if st.Healthy {
		fmt.Fprintln(a.out, "fleet: healthy")
	} else {
		fmt.Fprintln(a.out, "fleet: UNHEALTHY")
	}
}

// age formats seconds for the table: 0s, 42s, 5m3s, 2h10m.
func age(sec float64) string {
	d := time.Duration(sec * float64(time.Second)).Round(time.Second)
	if d >= time.Hour {
		d = d.Round(time.Minute)
	}
	return d.String()
}
