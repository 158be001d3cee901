// Command cellctl is the operator's CLI for the directory: cells, users, workspaces,
// memberships, tokens and placements, and for moving workspaces between cells (moves, drains,
// rebalancing).
//
// It talks to the directory database named by --directory-url or DIRECTORY_DATABASE_URL and
// applies the directory's migrations before any command. Tokens are printed once and only their
// hashes are stored.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"slidecells/shared/config"
	"slidecells/shared/directory"
	"slidecells/shared/ids"
	"slidecells/shared/logging"
)

func main() {
	if err := newRoot(os.Stdout).Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "cellctl:", redactURLs(logging.Redact(err.Error())))
		os.Exit(1)
	}
}

type app struct {
	url       string
	cellsFile string
	out       io.Writer
	dir       *directory.Directory
}

func (a *app) open(cmd *cobra.Command, _ []string) error {
	if a.url == "" {
		a.url = (&config.Loader{}).String("DIRECTORY_DATABASE_URL", "", false)
	}
	if a.url == "" {
		return errors.New("no directory: set --directory-url or DIRECTORY_DATABASE_URL")
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), 30*time.Second)
	defer cancel()
	d, err := directory.Open(ctx, a.url)
	if err != nil {
		return fmt.Errorf("directory: %w", err)
	}
	a.dir = d
	return nil
}

func newRoot(out io.Writer) *cobra.Command {
	a := &app{out: out}
	root := &cobra.Command{
		Use:           "cellctl",
		Short:         "Operate the cells of the presentation platform: cells, users, workspaces, tokens, placements",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	// The URL is read from the environment only when a command runs, never shown as the flag's
	// default: --help must not print a password.
	root.PersistentFlags().StringVar(&a.url, "directory-url", "", "directory database URL (default: $DIRECTORY_DATABASE_URL)")
	root.PersistentFlags().StringVar(&a.cellsFile, "cells-file", "", "for moves: JSON file of each cell's database_url and blob_url (default: $CELLCTL_CELLS_FILE)")
	root.AddCommand(a.statusCmd(), a.renderersCmd(), a.cellsCmd(), a.usersCmd(), a.workspacesCmd(), a.membersCmd(), a.tokensCmd(), a.placementsCmd(), a.movesCmd())
	return root
}

func (a *app) group(use, short string, subs ...*cobra.Command) *cobra.Command {
	c := &cobra.Command{Use: use, Short: short, Args: cobra.NoArgs}
	for _, s := range subs {
		s.PersistentPreRunE = a.open
		s.PersistentPostRun = func(*cobra.Command, []string) {
			if a.dir != nil {
				a.dir.Close()
			}
		}
		if s.Args == nil {
			s.Args = cobra.NoArgs
		}
		c.AddCommand(s)
	}
	return c
}

func (a *app) table(header string, rows [][]string) {
	w := tabwriter.NewWriter(a.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, header)
	for _, r := range rows {
		fmt.Fprintln(w, strings.Join(r, "\t"))
	}
	_ = w.Flush()
}

func (a *app) cellsCmd() *cobra.Command {
	var c directory.Cell
	add := &cobra.Command{Use: "add", Short: "Register a cell by ID and internal URL",
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := a.dir.AddCell(cmd.Context(), c); err != nil {
				return err
			}
			fmt.Fprintf(a.out, "cell %s added (%s)\n", c.ID, c.InternalURL)
			return nil
		}}
	add.Flags().StringVar(&c.ID, "id", "", "cell ID, e.g. cell-c (required)")
	add.Flags().StringVar(&c.InternalURL, "url", "", "internal base URL of the cell backend (required)")
	add.Flags().Int64Var(&c.MaxWorkspaces, "max-workspaces", 0, "capacity hint; 0 means unlimited")
	add.Flags().StringVar(&c.PreviewURL, "preview-url", "", "base URL (http(s)://host[:port]) of the cell's preview host; the router sends /preview/w/{workspace}/... there")
	_ = add.MarkFlagRequired("id")
	_ = add.MarkFlagRequired("url")
	list := &cobra.Command{Use: "list", Short: "List cells with internal URL, preview host URL, state and workspace count",
		RunE: func(cmd *cobra.Command, _ []string) error {
			cells, err := a.dir.CellsWithCounts(cmd.Context())
			if err != nil {
				return err
			}
			rows := make([][]string, 0, len(cells))
			for _, c := range cells {
				state, max := c.State, "-"
				if c.MaxWorkspaces > 0 {
					max = strconv.FormatInt(c.MaxWorkspaces, 10)
					if state == "active" && c.WorkspaceCount >= c.MaxWorkspaces {
						state = "full"
					}
				}
				preview := c.PreviewURL
				if preview == "" {
					preview = "-"
				}
				rows = append(rows, []string{c.ID, c.InternalURL, preview, state, strconv.FormatInt(c.WorkspaceCount, 10), max})
			}
			a.table("ID\tURL\tPREVIEW\tSTATE\tWORKSPACES\tMAX", rows)
			return nil
		}}
	var id, state, preview string
	var capacity int64
	set := &cobra.Command{Use: "set", Short: "Set a cell's state (active, draining: no new workspaces, down), capacity and/or preview host URL",
		RunE: func(cmd *cobra.Command, _ []string) error {
			if state == "" && !cmd.Flags().Changed("max-workspaces") && !cmd.Flags().Changed("preview-url") {
				return errors.New("give --state, --max-workspaces and/or --preview-url")
			}
			if cmd.Flags().Changed("preview-url") {
				if err := a.dir.SetCellPreviewURL(cmd.Context(), id, preview); err != nil {
					return err
				}
			}
			if state != "" {
				if err := a.dir.SetCellState(cmd.Context(), id, state); err != nil {
					return err
				}
			}
			if cmd.Flags().Changed("max-workspaces") {
				if err := a.dir.SetCellCapacity(cmd.Context(), id, capacity); err != nil {
					return err
				}
			}
			fmt.Fprintf(a.out, "cell %s updated\n", id)
			return nil
		}}
	set.Flags().StringVar(&id, "id", "", "cell ID (required)")
	set.Flags().StringVar(&state, "state", "", "active, draining or down")
	set.Flags().Int64Var(&capacity, "max-workspaces", 0, "most workspaces the cell takes; 0 means unlimited")
	set.Flags().StringVar(&preview, "preview-url", "", "base URL (http(s)://host[:port]) of the cell's preview host; \"\" removes it")
	_ = set.MarkFlagRequired("id")
	return a.group("cells", "Register, list, set, drain and rebalance cells", add, list, set, a.drainCmd(), a.rebalanceCmd())
}

func (a *app) usersCmd() *cobra.Command {
	var email, name string
	create := &cobra.Command{Use: "create", Short: "Create a user",
		RunE: func(cmd *cobra.Command, _ []string) error {
			u, err := a.dir.CreateUser(cmd.Context(), email, name)
			if err != nil {
				return err
			}
			fmt.Fprintln(a.out, u.ID)
			return nil
		}}
	create.Flags().StringVar(&email, "email", "", "e-mail address (required, unique)")
	create.Flags().StringVar(&name, "name", "", "display name (default: the e-mail)")
	_ = create.MarkFlagRequired("email")
	return a.group("users", "Create users", create)
}

func (a *app) workspacesCmd() *cobra.Command {
	var name, cell string
	var pin bool
	create := &cobra.Command{Use: "create", Short: "Create a workspace on a cell (without --cell: the least-loaded active cell with room); prints its ID",
		RunE: func(cmd *cobra.Command, _ []string) error {
			w, err := a.dir.CreateWorkspace(cmd.Context(), name, cell, pin)
			if err != nil {
				return err
			}
			fmt.Fprintln(a.out, w.ID)
			if cell == "" {
				fmt.Fprintf(cmd.ErrOrStderr(), "placed on %s\n", w.CellID)
			}
			return nil
		}}
	create.Flags().StringVar(&name, "name", "", "workspace name (required)")
	create.Flags().StringVar(&cell, "cell", "", "cell that hosts it (default: the active cell with the fewest workspaces and room for one more)")
	create.Flags().BoolVar(&pin, "pin", false, "pin the workspace to the cell (large tenants)")
	_ = create.MarkFlagRequired("name")
	var ws string
	pinCmd := &cobra.Command{Use: "pin", Short: "Pin a workspace to its current cell",
		RunE: func(cmd *cobra.Command, _ []string) error { return a.setPinned(cmd, ws, true) }}
	unpin := &cobra.Command{Use: "unpin", Short: "Unpin a workspace",
		RunE: func(cmd *cobra.Command, _ []string) error { return a.setPinned(cmd, ws, false) }}
	for _, c := range []*cobra.Command{pinCmd, unpin} {
		c.Flags().StringVar(&ws, "workspace", "", "workspace ID (required)")
		_ = c.MarkFlagRequired("workspace")
	}
	return a.group("workspaces", "Create, pin, move and limit workspaces", create, pinCmd, unpin, a.moveCmd(), a.limitCmd(), a.limitsCmd())
}

func (a *app) setPinned(cmd *cobra.Command, ws string, pinned bool) error {
	if !ids.Valid(ids.Workspace, ws) {
		return fmt.Errorf("--workspace %q is not a workspace ID", ws)
	}
	if err := a.dir.SetPinned(cmd.Context(), ws, pinned); err != nil {
		return err
	}
	fmt.Fprintf(a.out, "workspace %s pinned=%v\n", ws, pinned)
	return nil
}

func (a *app) membersCmd() *cobra.Command {
	var ws, user, role string
	add := &cobra.Command{Use: "add", Short: "Give a user a role (owner, admin, editor, viewer) in a workspace",
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !ids.Valid(ids.Workspace, ws) {
				return fmt.Errorf("--workspace %q is not a workspace ID", ws)
			}
			u, err := a.dir.ResolveUser(cmd.Context(), user)
			if err != nil {
				return fmt.Errorf("--user %q: %w", user, err)
			}
			if err := a.dir.AddMember(cmd.Context(), ws, u.ID, role); err != nil {
				return err
			}
			fmt.Fprintf(a.out, "%s is %s in %s\n", u.Email, role, ws)
			return nil
		}}
	add.Flags().StringVar(&ws, "workspace", "", "workspace ID (required)")
	add.Flags().StringVar(&user, "user", "", "user ID or e-mail (required)")
	add.Flags().StringVar(&role, "role", "", "owner, admin, editor or viewer (required)")
	for _, f := range []string{"workspace", "user", "role"} {
		_ = add.MarkFlagRequired(f)
	}
	return a.group("members", "Manage workspace memberships", add)
}

// parseLifetime accepts Go durations and a days suffix ("90d").
func parseLifetime(s string) (time.Duration, error) {
	if strings.HasSuffix(s, "d") {
		n, err := strconv.Atoi(strings.TrimSuffix(s, "d"))
		if err != nil || n <= 0 {
			return 0, fmt.Errorf("--expires %q: use e.g. 90d or 720h", s)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("--expires %q: use e.g. 90d or 720h", s)
	}
	return d, nil
}

func (a *app) tokensCmd() *cobra.Command {
	var user, scopes, expires, name string
	create := &cobra.Command{Use: "create", Short: "Issue a personal access token (printed once)",
		RunE: func(cmd *cobra.Command, _ []string) error {
			life, err := parseLifetime(expires)
			if err != nil {
				return err
			}
			u, err := a.dir.ResolveUser(cmd.Context(), user)
			if err != nil {
				return fmt.Errorf("--user %q: %w", user, err)
			}
			list := strings.Split(scopes, ",")
			if scopes == "all" {
				list = directory.Scopes
			}
			secret, t, err := a.dir.CreateToken(cmd.Context(), u.ID, name, list, life)
			if err != nil {
				return err
			}
			fmt.Fprintln(os.Stderr, "token", t.ID, "expires", t.ExpiresAt.Format(time.RFC3339), "- store it now; it is not shown again")
			fmt.Fprintln(a.out, secret)
			return nil
		}}
	create.Flags().StringVar(&user, "user", "", "user ID or e-mail (required)")
	create.Flags().StringVar(&scopes, "scopes", "", "comma-separated scopes, or 'all' (required): "+strings.Join(directory.Scopes, ","))
	create.Flags().StringVar(&expires, "expires", "90d", "lifetime, e.g. 90d or 720h (max 366d)")
	create.Flags().StringVar(&name, "name", "", "a label for the token")
	_ = create.MarkFlagRequired("user")
	_ = create.MarkFlagRequired("scopes")
	var id string
	revoke := &cobra.Command{Use: "revoke", Short: "Revoke a token by ID",
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !ids.Valid(ids.Token, id) {
				return fmt.Errorf("--id %q is not a token ID (tok_…)", id)
			}
			if err := a.dir.RevokeToken(cmd.Context(), id); err != nil {
				return err
			}
			fmt.Fprintf(a.out, "token %s revoked\n", id)
			return nil
		}}
	revoke.Flags().StringVar(&id, "id", "", "token ID (required)")
	_ = revoke.MarkFlagRequired("id")
	var listUser string
	list := &cobra.Command{Use: "list", Short: "List a user's tokens (never the secrets)",
		RunE: func(cmd *cobra.Command, _ []string) error {
			u, err := a.dir.ResolveUser(cmd.Context(), listUser)
			if err != nil {
				return fmt.Errorf("--user %q: %w", listUser, err)
			}
			ts, err := a.dir.Tokens(cmd.Context(), u.ID)
			if err != nil {
				return err
			}
			var rows [][]string
			for _, t := range ts {
				state := "active"
				if t.RevokedAt != nil {
					state = "revoked"
				} else if time.Now().After(t.ExpiresAt) {
					state = "expired"
				}
				rows = append(rows, []string{t.ID, t.Name, state, t.ExpiresAt.Format(time.RFC3339), strings.Join(t.Scopes, ",")})
			}
			a.table("ID\tNAME\tSTATE\tEXPIRES\tSCOPES", rows)
			return nil
		}}
	list.Flags().StringVar(&listUser, "user", "", "user ID or e-mail (required)")
	_ = list.MarkFlagRequired("user")
	return a.group("tokens", "Issue, list and revoke personal access tokens", create, revoke, list)
}

func (a *app) placementsCmd() *cobra.Command {
	var cell string
	list := &cobra.Command{Use: "list", Short: "List workspace placements (cell, epoch, state, pinned)",
		RunE: func(cmd *cobra.Command, _ []string) error {
			ps, err := a.dir.Placements(cmd.Context(), cell)
			if err != nil {
				return err
			}
			rows := make([][]string, 0, len(ps))
			for _, p := range ps {
				rows = append(rows, []string{p.WorkspaceID, p.CellID, strconv.FormatInt(p.Epoch, 10), p.State, strconv.FormatBool(p.Pinned)})
			}
			a.table("WORKSPACE\tCELL\tEPOCH\tSTATE\tPINNED", rows)
			return nil
		}}
	list.Flags().StringVar(&cell, "cell", "", "only this cell")
	return a.group("placements", "Inspect placements", list)
}
