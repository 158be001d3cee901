package stack

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"time"

	"slidecells/shared/directory"
)

// Demo is the demo data `make run` seeds.
type Demo struct {
	UserID      string `json:"user_id"`
	WorkspaceA  string `json:"workspace_a"`
	WorkspaceB  string `json:"workspace_b"`
	PAT         string `json:"pat"`
	PATReadOnly string `json:"pat_readonly"`
}

// demoLifetime is the lifetime of the demo tokens.
const demoLifetime = 90 * 24 * time.Hour

// SeedDemo creates the demo user, one workspace on each of the first two cells and two tokens,
// once. statePath (gitignored) keeps the token secrets between runs, since only their hashes
// are in the directory; tokens that no longer work are replaced.
func (s *Stack) SeedDemo(ctx context.Context, statePath string) (Demo, error) {
	var d Demo
	if b, err := os.ReadFile(statePath); err == nil {
		_ = json.Unmarshal(b, &d)
	}
	dir := s.Directory
	u, err := dir.UserByEmail(ctx, "demo@example.com")
	if errors.Is(err, directory.ErrNotFound) {
		u, err = dir.CreateUser(ctx, "demo@example.com", "Demo User")
	}
	if err != nil {
		return d, err
	}
	d.UserID = u.ID
	ws := func(name, cell string) (string, error) {
		w, err := dir.WorkspaceByName(ctx, name)
		if errors.Is(err, directory.ErrNotFound) {
			w, err = dir.CreateWorkspace(ctx, name, cell, false)
		}
		if err != nil {
			return "", err
		}
		return w.ID, dir.AddMember(ctx, w.ID, u.ID, "owner")
	}
	if d.WorkspaceA, err = ws("Demo A", s.opts.Cells[0]); err != nil {
		return d, err
	}
	if d.WorkspaceB, err = ws("Demo B", s.opts.Cells[len(s.opts.Cells)-1]); err != nil {
		return d, err
	}
	token := func(have, name string, scopes []string) (string, error) {
		if have != "" {
			t, err := dir.TokenByHash(ctx, directory.HashToken(have))
			if err == nil && t.RevokedAt == nil && time.Until(t.ExpiresAt) > 24*time.Hour {
				return have, nil
			}
		}
		secret, _, err := dir.CreateToken(ctx, u.ID, name, scopes, demoLifetime)
		return secret, err
	}
	if d.PAT, err = token(d.PAT, "demo-all", directory.Scopes); err != nil {
		return d, err
	}
	if d.PATReadOnly, err = token(d.PATReadOnly, "demo-readonly", directory.RoleScopes["viewer"]); err != nil {
		return d, err
	}
	b, _ := json.MarshalIndent(d, "", "  ")
	return d, os.WriteFile(statePath, b, 0o600)
}
