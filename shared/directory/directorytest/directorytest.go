// Package directorytest gives tests of the directory's readers (the cell's tenancy guard and
// rate limiter) the directory's answers fixed in memory: what the test put in for a workspace,
// and directory.ErrNotFound for any other, as the directory answers an unknown workspace. It is
// for answers a test needs in states a real directory reaches only through a long history (a
// placement at epoch 5 on another cell); tests that can, use a real directory (cell/auth/authtest).
package directorytest

import (
	"context"

	"slidecells/shared/directory"
)

// Placements are fixed placements by workspace ID (tenancy.Placements).
type Placements map[string]directory.Placement

// Placement returns the workspace's placement.
func (p Placements) Placement(_ context.Context, workspaceID string) (directory.Placement, error) {
	return lookup(p, workspaceID)
}

// FreshPlacement returns the workspace's placement: there is no cache to bypass.
func (p Placements) FreshPlacement(_ context.Context, workspaceID string) (directory.Placement, error) {
	return lookup(p, workspaceID)
}

// Limits are fixed per-workspace limit overrides by workspace ID (ratelimit.Overrides).
type Limits map[string]directory.Limits

// Limits returns the workspace's overrides.
func (l Limits) Limits(_ context.Context, workspaceID string) (directory.Limits, error) {
	return lookup(l, workspaceID)
}

func lookup[V any](m map[string]V, workspaceID string) (V, error) {
	if v, ok := m[workspaceID]; ok {
		return v, nil
	}
	var zero V
	return zero, directory.ErrNotFound
}
