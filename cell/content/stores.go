package content

import (
	"context"
	"encoding/json"

	"slidecells/cell/auth/scope"
	"slidecells/cell/design"
)

// What the content services need of the cell's database, satisfied by *store.Store: this
// package names no database. (The bytes are in *blob.Store, which names none either.)

// AssetStore reads and writes asset rows and the families whose bundles reference them.
type AssetStore interface {
	GetAsset(ctx context.Context, sc scope.Scope, id string) (Asset, error)
	CreateAsset(ctx context.Context, sc scope.Scope, a NewAsset) (Asset, error)
	ReplaceAssetContent(ctx context.Context, sc scope.Scope, id, baseline string, c AssetContent) (Asset, error)
	GetFontFamily(ctx context.Context, sc scope.Scope, id string) (design.FontFamily, error)
}

// ProjectStore reads and writes the structured parts of projects.
type ProjectStore interface {
	GetProject(ctx context.Context, sc scope.Scope, id string) (Project, error)
	GetStyle(ctx context.Context, sc scope.Scope, id string) (design.Style, error)
	GetPart(ctx context.Context, sc scope.Scope, projectID string, p Part) (json.RawMessage, int64, error)
	WritePart(ctx context.Context, sc scope.Scope, projectID string, p Part, baseline int64, refs Refs,
		value func(current json.RawMessage, live Live) (any, error)) (int64, error)
}

// Part is one structured, separately versioned part of a project.
type Part string

// The parts of a project.
const (
	PartConfiguration Part = "configuration"
	PartRouteTree     Part = "route tree"
	PartBuildAssets   Part = "build assets"
)

// Name is the part's name in messages ("route tree").
func (p Part) Name() string { return string(p) }
