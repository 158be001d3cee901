// Command devstack is `make run`: it starts the whole local deployment (PostgreSQL, the
// directory, cell-a and cell-b with a preview host each (when bin/preview is built) and two
// renderers each, the router), seeds demo data, writes .run/env and runs until Ctrl-C or
// SIGTERM, then stops every child.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"slidecells/deploy/stack"
	"slidecells/shared/config"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "devstack:", err)
		os.Exit(1)
	}
}

func run() error {
	dir := flag.String("dir", ".run", "state folder (database, logs, env)")
	bin := flag.String("bin", "bin", "folder of the built binaries")
	settings := &config.Loader{}
	routerAddr := flag.String("router-addr", settings.Addr("RUN_ROUTER_ADDR", "127.0.0.1:8080", false), "router listen address ($RUN_ROUTER_ADDR)")
	cells := flag.String("cells", "cell-a,cell-b", "cells to run")
	flag.Parse()
	cellURLs := map[string]string{}
	for _, c := range strings.Split(*cells, ",") {
		if u := settings.String(strings.ToUpper(strings.ReplaceAll(c, "-", "_"))+"_DATABASE_URL", "", false); u != "" {
			cellURLs[c] = u
		}
	}
	directoryURL := settings.String("DIRECTORY_DATABASE_URL", "", false)
	if err := settings.Err(); err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	abs, err := filepath.Abs(*dir)
	if err != nil {
		return err
	}
	binAbs, err := filepath.Abs(*bin)
	if err != nil {
		return err
	}
	if l, err := net.Listen("tcp", *routerAddr); err != nil {
		fmt.Printf("router address %s is busy; picking a free port\n", *routerAddr)
		*routerAddr = ""
	} else {
		l.Close()
	}
	logf := func(format string, args ...any) { fmt.Printf("• "+format+"\n", args...) }
	s, err := stack.Start(ctx, stack.Options{
		Dir: abs, BinDir: binAbs, Cells: strings.Split(*cells, ","), RouterAddr: *routerAddr,
		DirectoryURL: directoryURL, CellURLs: cellURLs, Durable: true, Renderers: true, Log: logf,
	})
	if err != nil {
		return err
	}
	defer func() {
		fmt.Println("\nstopping router, cells and database…")
		s.Stop()
		fmt.Println("stopped")
	}()
	demo, err := s.SeedDemo(ctx, filepath.Join(abs, "demo.json"))
	if err != nil {
		return fmt.Errorf("seed: %w", err)
	}
	// Demo content through the public API: a project with a title and a chart page in each
	// demo workspace (kept on later runs).
	content := map[string]stack.DemoContent{}
	for _, ws := range []string{demo.WorkspaceA, demo.WorkspaceB} {
		c, err := s.SeedContent(ctx, demo.PAT, ws)
		if err != nil {
			fmt.Printf("• demo content of %s not seeded: %v\n", ws, err)
			continue
		}
		content[ws] = c
	}
	env := fmt.Sprintf(`export BASE_URL=%s
export ROUTER_INTERNAL_URL=%s
export PAT=%s
export PAT_READONLY=%s
export WORKSPACE_A=%s
export WORKSPACE_B=%s
export DIRECTORY_DATABASE_URL=%s
export CELLCTL=%s
export CELLCTL_CELLS_FILE=%s
`, s.RouterURL, s.RouterInternalURL, demo.PAT, demo.PATReadOnly, demo.WorkspaceA, demo.WorkspaceB, s.DirURL, filepath.Join(binAbs, "cellctl"), s.CellsFile)
	for suffix, ws := range map[string]string{"A": demo.WorkspaceA, "B": demo.WorkspaceB} {
		if c, ok := content[ws]; ok {
			env += fmt.Sprintf("export PROJECT_%s=%s\nexport PAGE_%s=%s\nexport CHART_PAGE_%s=%s\n",
				suffix, c.ProjectID, suffix, c.Pages["title"], suffix, c.Pages["chart"])
		}
	}
	for _, c := range strings.Split(*cells, ",") {
		name := strings.ToUpper(strings.ReplaceAll(c, "-", "_"))
		env += fmt.Sprintf("export %s_URL=%s\n", name, s.Cells[c].URL)
		if p := s.Previews[c]; p != nil {
			env += fmt.Sprintf("export %s_PREVIEW_URL=%s\n", name, p.URL)
		}
	}
	if err := os.WriteFile(filepath.Join(abs, "env"), []byte(env), 0o600); err != nil {
		return err
	}
	fmt.Printf(`
Local deployment is up.
  router (public)   %s
  router (internal) %s (/livez, /readyz, /metrics)
`, s.RouterURL, s.RouterInternalURL)
	for _, c := range strings.Split(*cells, ",") {
		fmt.Printf("  %-17s %s (internal)\n", c, s.Cells[c].URL)
		if p := s.Previews[c]; p != nil {
			fmt.Printf("  %-17s %s (internal; public as %s/preview/w/{workspace}/…)\n", c+" preview", p.URL, s.RouterURL)
		} else {
			fmt.Printf("  %-17s not running (build bin/preview)\n", c+" preview")
		}
		for _, r := range s.Renderers[c] {
			fmt.Printf("  %-17s %s (internal)\n", r.Name, r.URL)
		}
	}
	if s.ProfileDigest != "" {
		fmt.Printf("  render profile    %s (%s)\n", s.ProfileManifest, s.ProfileDigest)
	}
	fmt.Printf(`  directory DB      %s
  workspace A       %s (on %s; demo project %s, pages $PAGE_A and $CHART_PAGE_A)
  workspace B       %s (on %s; demo project %s)
  PAT (all scopes)  %s
  PAT (read-only)   %s
  logs              %s

Try:  source %s && curl -s -H "Authorization: Bearer $PAT" $BASE_URL/api/v1/workspaces
      curl -s -H "Authorization: Bearer $PAT" -H "X-Workspace-ID: $WORKSPACE_A" $BASE_URL/api/v1/pages/$CHART_PAGE_A/screenshot -o chart.png
Ctrl-C stops everything.
`, s.DirURL, demo.WorkspaceA, strings.Split(*cells, ",")[0], content[demo.WorkspaceA].ProjectID,
		demo.WorkspaceB, strings.Split(*cells, ",")[len(strings.Split(*cells, ","))-1], content[demo.WorkspaceB].ProjectID,
		demo.PAT, demo.PATReadOnly, filepath.Join(abs, "logs"), filepath.Join(*dir, "env"))
	select {
	case <-ctx.Done():
	case <-s.Router.Done():
		return fmt.Errorf("router exited; see %s", filepath.Join(abs, "logs", "router.log"))
	}
	return nil
}
