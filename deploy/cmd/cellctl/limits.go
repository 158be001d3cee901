package main

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"slidecells/shared/directory"
	"slidecells/shared/ids"
)

func (a *app) limitCmd() *cobra.Command {
	var rate float64
	var burst, jobs int64
	var clear bool
	c := &cobra.Command{Use: "limit <workspace> [--rate R] [--burst B] [--jobs N] | --clear",
		Short: "Override a workspace's request rate (per second), burst and running-job cap; cells apply it within their directory cache TTL",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ws := args[0]
			if !ids.Valid(ids.Workspace, ws) {
				return fmt.Errorf("%q is not a workspace ID", ws)
			}
			if _, err := a.dir.Workspace(cmd.Context(), ws); err != nil {
				return fmt.Errorf("workspace %s: %w", ws, err)
			}
			if clear {
				if err := a.dir.ClearLimits(cmd.Context(), ws); err != nil {
					return err
				}
				fmt.Fprintf(a.out, "%s: the cells' default limits\n", ws)
				return nil
			}
			f := cmd.Flags()
			if !f.Changed("rate") && !f.Changed("burst") && !f.Changed("jobs") {
				return errors.New("give --rate, --burst and/or --jobs, or --clear")
			}
			l, err := a.dir.WorkspaceLimits(cmd.Context(), ws)
			if err != nil && !errors.Is(err, directory.ErrNotFound) {
				return err
			}
			l.WorkspaceID = ws
			if f.Changed("rate") {
				l.RequestsPerSecond = &rate
			}
			if f.Changed("burst") {
				l.Burst = &burst
			}
			if f.Changed("jobs") {
				l.JobConcurrency = &jobs
			}
			if err := a.dir.SetLimits(cmd.Context(), l); err != nil {
				return err
			}
			fmt.Fprintf(a.out, "%s: %s\n", ws, describeLimits(l))
			return nil
		}}
	c.Flags().Float64Var(&rate, "rate", 0, "requests per second (above 0)")
	c.Flags().Int64Var(&burst, "burst", 0, "requests at once above the rate (1 or more)")
	c.Flags().Int64Var(&jobs, "jobs", 0, "mutation jobs running at once (1 or more)")
	c.Flags().BoolVar(&clear, "clear", false, "remove the overrides")
	return c
}

func describeLimits(l directory.Limits) string {
	s := func(p *int64) string {
		if p == nil {
			return "default"
		}
		return strconv.FormatInt(*p, 10)
	}
	r := "default"
	if l.RequestsPerSecond != nil {
		r = strconv.FormatFloat(*l.RequestsPerSecond, 'g', -1, 64) + "/s"
	}
	return fmt.Sprintf("rate %s, burst %s, jobs %s", r, s(l.Burst), s(l.JobConcurrency))
}

func (a *app) limitsCmd() *cobra.Command {
	return &cobra.Command{Use: "limits", Short: "List workspaces' limit overrides",
		RunE: func(cmd *cobra.Command, _ []string) error {
			ls, err := a.dir.AllLimits(cmd.Context())
			if err != nil {
				return err
			}
			rows := make([][]string, 0, len(ls))
			for _, l := range ls {
				rows = append(rows, []string{l.WorkspaceID, describeLimits(l)})
			}
			a.table("WORKSPACE\tLIMITS", rows)
			return nil
		}}
}
