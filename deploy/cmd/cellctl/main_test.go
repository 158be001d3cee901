package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"slidecells/shared/db/dbtest"
)

func run(t *testing.T, url string, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	root := newRoot(&out)
	root.SetArgs(append([]string{"--directory-url", url}, args...))
	root.SetErr(&bytes.Buffer{})
	err := root.ExecuteContext(context.Background())
	return out.String(), err
}

func TestCellctlFlow(t *testing.T) {
	url := dbtest.NewDatabase(t, nil, "")
	mustRun := func(args ...string) string {
		out, err := run(t, url, args...)
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		return strings.TrimSpace(out)
	}
	mustRun("cells", "add", "--id", "cell-a", "--url", "http://127.0.0.1:9001", "--preview-url", "http://127.0.0.1:9101/")
	user := mustRun("users", "create", "--email", "ann@example.com")
	ws := mustRun("workspaces", "create", "--name", "Acme", "--cell", "cell-a", "--pin")
	mustRun("members", "add", "--workspace", ws, "--user", "ann@example.com", "--role", "editor")
	tok := mustRun("tokens", "create", "--user", user, "--scopes", "page:read,project:read", "--expires", "30d")
	if !strings.HasPrefix(tok, "svc_pat_") {
		t.Fatalf("token %q", tok)
	}
	cells := mustRun("cells", "list")
	if fields := strings.Fields(strings.Split(cells, "\n")[1]); len(fields) != 6 || fields[0] != "cell-a" || fields[1] != "http://127.0.0.1:9001" ||
		fields[2] != "http://127.0.0.1:9101" || fields[3] != "active" || fields[4] != "1" {
		t.Fatalf("cells list:\n%s", cells)
	}
	mustRun("cells", "set", "--id", "cell-a", "--preview-url", "https://preview.cell-a.internal:8443")
	if fields := strings.Fields(strings.Split(mustRun("cells", "list"), "\n")[1]); fields[2] != "https://preview.cell-a.internal:8443" {
		t.Fatalf("preview URL not set: %v", fields)
	}
	mustRun("cells", "set", "--id", "cell-a", "--preview-url", "")
	if fields := strings.Fields(strings.Split(mustRun("cells", "list"), "\n")[1]); fields[2] != "-" {
		t.Fatalf("preview URL not removed: %v", fields)
	}
	if pl := mustRun("placements", "list"); !strings.Contains(pl, ws) || !strings.Contains(pl, "true") {
		t.Fatalf("placements:\n%s", pl)
	}
	list := mustRun("tokens", "list", "--user", user)
	if strings.Contains(list, tok) {
		t.Fatal("tokens list shows a secret")
	}
	id := strings.Fields(strings.Split(list, "\n")[1])[0]
	mustRun("tokens", "revoke", "--id", id)
	if list := mustRun("tokens", "list", "--user", user); !strings.Contains(list, "revoked") {
		t.Fatalf("not revoked:\n%s", list)
	}
}

func TestCellctlBadInput(t *testing.T) {
	url := dbtest.NewDatabase(t, nil, "")
	if _, err := run(t, url, "cells", "add", "--id", "cell-a", "--url", "http://x"); err != nil {
		t.Fatal(err)
	}
	cases := [][]string{
		{"cells", "add", "--id", "Bad_ID", "--url", "http://x"},
		{"cells", "add", "--id", "cell-a", "--url", "http://x"}, // duplicate
		{"cells", "add", "--id", "cell-z", "--url", "ftp://x"},
		{"cells", "add", "--id", "cell-y", "--url", "http://y", "--preview-url", "http://p/preview"}, // a path
		{"cells", "add", "--id", "cell-y", "--url", "http://y", "--preview-url", "ftp://p"},
		{"cells", "set", "--id", "cell-a", "--preview-url", "http://user:pw@p"},
		{"cells", "set", "--id", "cell-a", "--preview-url", "http://p?x=1"},
		{"cells", "set", "--id", "nope", "--preview-url", "http://p"},
		{"cells", "add", "--url", "http://x"}, // missing --id
		{"users", "create", "--email", "not-an-address"},
		{"workspaces", "create", "--name", "X", "--cell", "nope"},
		{"members", "add", "--workspace", "ws_bad", "--user", "x@example.com", "--role", "owner"},
		{"tokens", "create", "--user", "nobody@example.com", "--scopes", "page:read"},
		{"tokens", "revoke", "--id", "nope"},
		{"cells", "list", "extra-arg"},
	}
	for _, c := range cases {
		if _, err := run(t, url, c...); err == nil {
			t.Errorf("%v: no error", c)
		}
	}
	if _, err := run(t, url, "users", "create", "--email", "ann@example.com"); err != nil {
		t.Fatal(err)
	}
	for _, c := range [][]string{
		{"tokens", "create", "--user", "ann@example.com", "--scopes", "page:read,admin:all"},
		{"tokens", "create", "--user", "ann@example.com", "--scopes", "page:read", "--expires", "900d"},
		{"tokens", "create", "--user", "ann@example.com", "--scopes", "page:read", "--expires", "soon"},
	} {
		if _, err := run(t, url, c...); err == nil {
			t.Errorf("%v: no error", c)
		}
	}
	if _, err := run(t, "", "cells", "list"); err == nil {
		t.Error("no directory URL: no error")
	}
}

// Without --cell a workspace goes to the active cell with the fewest workspaces and room for one
// more; a full cell takes none, named or not.
func TestAutomaticPlacement(t *testing.T) {
	url := dbtest.NewDatabase(t, nil, "")
	mustRun := func(args ...string) string {
		out, err := run(t, url, args...)
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		return strings.TrimSpace(out)
	}
	mustRun("cells", "add", "--id", "cell-a", "--url", "http://127.0.0.1:9001", "--max-workspaces", "2")
	mustRun("cells", "add", "--id", "cell-b", "--url", "http://127.0.0.1:9002")
	placed := map[string]int{}
	for _, name := range []string{"w1", "w2", "w3", "w4", "w5"} {
		mustRun("workspaces", "create", "--name", name)
	}
	list := mustRun("placements", "list")
	for _, line := range strings.Split(list, "\n") {
		for _, c := range []string{"cell-a", "cell-b"} {
			if strings.Contains(line, c) {
				placed[c]++
			}
		}
	}
	// Least-loaded first, ties by ID: a, b, a (now full), b, b.
	if placed["cell-a"] != 2 || placed["cell-b"] != 3 {
		t.Fatalf("placements %v:\n%s", placed, list)
	}
	if _, err := run(t, url, "workspaces", "create", "--name", "x", "--cell", "cell-a"); err == nil || !strings.Contains(err.Error(), "full") {
		t.Fatalf("a full cell took a workspace: %v", err)
	}
	if cells := mustRun("cells", "list"); !strings.Contains(cells, "full") {
		t.Fatalf("cells list does not show the full cell:\n%s", cells)
	}
	// A draining cell takes no new workspace; raising cell-a's capacity makes it the choice again.
	mustRun("cells", "set", "--id", "cell-b", "--state", "draining")
	if _, err := run(t, url, "workspaces", "create", "--name", "y"); err == nil || !strings.Contains(err.Error(), "no active cell has room") {
		t.Fatalf("placed although every cell is full or draining: %v", err)
	}
	mustRun("cells", "set", "--id", "cell-a", "--max-workspaces", "0")
	mustRun("workspaces", "create", "--name", "z")
	if n := strings.Count(mustRun("placements", "list"), "cell-a"); n != 3 {
		t.Fatalf("cell-a hosts %d workspaces, want 3", n)
	}
	if _, err := run(t, url, "cells", "set", "--id", "cell-a", "--state", "sleeping"); err == nil {
		t.Fatal("an unknown state was accepted")
	}
}

// --help never shows the directory URL from the environment (it may hold a password).
func TestHelpPrintsNoCredentials(t *testing.T) {
	t.Setenv("DIRECTORY_DATABASE_URL", "postgres://u:s3cret-password@127.0.0.1/db")
	var out, errOut bytes.Buffer
	root := newRoot(&out)
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs([]string{"--help"})
	if err := root.ExecuteContext(context.Background()); err != nil {
		t.Fatal(err)
	}
	if help := out.String() + errOut.String(); strings.Contains(help, "s3cret") || !strings.Contains(help, "directory-url") {
		t.Fatalf("help:\n%s", help)
	}
}
