package api

import (
	"context"
	"net/http"

	"slidecells/cell/design"
	"slidecells/shared/problem"
)

// Standard is the page or component standard the backend enforces: what a client must produce.
type Standard struct {
	Kind           string        `json:"kind" enum:"page,component"`
	Version        string        `json:"version"`
	FileTypes      []string      `json:"file_types"`
	Entry          string        `json:"entry" doc:"the entry contract of a module"`
	ImportsAllowed []string      `json:"imports_allowed" doc:"import specifiers a module may use"`
	Canvas         design.Canvas `json:"canvas"`
	Limits         Limits        `json:"limits"`
}

// Limits are the content limits.
type Limits struct {
	MaxSourceBytes    int `json:"max_source_bytes"`
	MaxDependencies   int `json:"max_dependencies"`
	MaxScenes         int `json:"max_scenes,omitempty"`
	MaxAssetBytes     int `json:"max_asset_bytes"`
	MaxImportDepth    int `json:"max_import_depth"`
	MaxKeyLength      int `json:"max_key_length"`
	MaxMetadataLength int `json:"max_metadata_bytes"`
}

var standards = map[string]Standard{
	"page": {Kind: "page", Version: "1", FileTypes: []string{"tsx", "jsx", "html"},
		Entry:          "default export: a React component rendering one slide on the fixed canvas; html pages are a single document body",
		ImportsAllowed: []string{"react", "@components/<key>", "@kit/<item>"},
		Canvas:         design.RenderCanvas,
		Limits:         Limits{MaxSourceBytes: 512 << 10, MaxDependencies: 64, MaxAssetBytes: 25 << 20, MaxImportDepth: 8, MaxKeyLength: 64, MaxMetadataLength: 16 << 10}},
	"component": {Kind: "component", Version: "1", FileTypes: []string{"tsx", "jsx"},
		Entry:          "default export: a React component; optional named export `scenes` mapping preset names to props (the default scene uses no props)",
		ImportsAllowed: []string{"react", "@components/<key>", "@kit/<item>"},
		Canvas:         design.RenderCanvas,
		Limits:         Limits{MaxSourceBytes: 256 << 10, MaxDependencies: 32, MaxScenes: 16, MaxAssetBytes: 25 << 20, MaxImportDepth: 8, MaxKeyLength: 64, MaxMetadataLength: 16 << 10}},
}

// StandardOutput is one standard.
type StandardOutput struct {
	Body Standard
}

// KitItem is one runtime kit item: a module pages may import as @kit/<name>.
type KitItem struct {
	Name        string   `json:"name"`
	Version     string   `json:"version"`
	Description string   `json:"description"`
	Exports     []string `json:"exports"`
}

var runtimeKit = []KitItem{
	{Name: "layout", Version: "1.0.0", Description: "slide layout primitives on the fixed canvas", Exports: []string{"Slide", "Stack", "Columns", "Grid", "Spacer"}},
	{Name: "text", Version: "1.0.0", Description: "typography bound to the theme's heading, body and code roles", Exports: []string{"Title", "Heading", "Body", "Code", "Caption"}},
	{Name: "media", Version: "1.0.0", Description: "assets by ID, resolved to immutable digest-addressed URLs", Exports: []string{"Image", "Figure"}},
	{Name: "chart", Version: "1.0.0", Description: "static SVG charts that render deterministically", Exports: []string{"BarChart", "LineChart", "PieChart"}},
	{Name: "ready", Version: "1.0.0", Description: "the render-ready.v1 protocol hooks: resource and scene readiness", Exports: []string{"useResource", "useSceneReady"}},
}

// KitIndexOutput is the runtime kit index.
type KitIndexOutput struct {
	Body struct {
		Version string    `json:"version"`
		Items   []KitItem `json:"items"`
	}
}

// KitItemOutput is one runtime kit item.
type KitItemOutput struct {
	Body KitItem
}

// KitItemPath names a kit item.
type KitItemPath struct {
	Item string `path:"item" maxLength:"64" pattern:"^[a-z][a-z0-9-]*$"`
}

// FontsOutput lists the platform presets.
type FontsOutput struct {
	Body struct {
		Presets  []design.FontPreset `json:"presets"`
		Defaults map[string]string   `json:"defaults" doc:"preset used per role when a theme names none"`
	}
}

func (s *Server) registerStandards() {
	for _, kind := range []string{"page", "component"} {
		std := standards[kind]
		Register(s, Operation{ID: "get-standard-" + kind, Method: http.MethodGet, Path: "/api/v1/standards/" + kind,
			Summary: "The " + kind + " standard published by the backend", Tags: []string{"standards"}, Access: Authenticated, ReadOnly: true},
			func(ctx context.Context, _ *struct{}) (*StandardOutput, error) {
				return &StandardOutput{Body: std}, nil
			})
	}
	Register(s, Operation{ID: "get-runtime-kit", Method: http.MethodGet, Path: "/api/v1/runtime-kit",
		Summary: "Runtime kit index", Tags: []string{"standards"}, Access: Authenticated, ReadOnly: true},
		func(ctx context.Context, _ *struct{}) (*KitIndexOutput, error) {
			out := &KitIndexOutput{}
			out.Body.Version, out.Body.Items = "1", runtimeKit
			return out, nil
		})
	Register(s, Operation{ID: "get-runtime-kit-item", Method: http.MethodGet, Path: "/api/v1/runtime-kit/{item}",
		Summary: "One runtime kit item", Tags: []string{"standards"}, Access: Authenticated, ReadOnly: true},
		func(ctx context.Context, in *KitItemPath) (*KitItemOutput, error) {
			for _, it := range runtimeKit {
				if it.Name == in.Item {
					return &KitItemOutput{Body: it}, nil
				}
			}
			return nil, problem.ErrNotFound()
		})
	Register(s, Operation{ID: "list-platform-fonts", Method: http.MethodGet, Path: "/api/v1/fonts",
		Summary: "Platform font presets", Tags: []string{"fonts"}, Access: Authenticated, ReadOnly: true},
		func(ctx context.Context, _ *struct{}) (*FontsOutput, error) {
			out := &FontsOutput{}
			out.Body.Presets = design.FontPresets
			out.Body.Defaults = design.DefaultPresets()
			return out, nil
		})
}
