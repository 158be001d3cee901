// Package catalog holds what the platform publishes as data, free of HTTP and SQL: the page and
// component standards, the runtime kit, and the AI agent catalogue with a workspace's view of it.
package catalog

import (
	"encoding/json"

	"slidecells/cell/design"
)

// Standard is the page or component standard the backend enforces: what a client must produce.
type Standard struct {
	Kind           string        `json:"kind"`
	Version        string        `json:"version"`
	FileTypes      []string      `json:"file_types"`
	Entry          string        `json:"entry"`
	ImportsAllowed []string      `json:"imports_allowed"`
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

// Standards are the page and component standards, by kind.
var Standards = map[string]Standard{
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

// KitItem is one runtime kit item: a module pages may import as @kit/<name>.
type KitItem struct {
	Name        string   `json:"name"`
	Version     string   `json:"version"`
	Description string   `json:"description"`
	Exports     []string `json:"exports"`
}

// RuntimeKit is the runtime kit, in index order.
var RuntimeKit = []KitItem{
	{Name: "layout", Version: "1.0.0", Description: "slide layout primitives on the fixed canvas", Exports: []string{"Slide", "Stack", "Columns", "Grid", "Spacer"}},
	{Name: "text", Version: "1.0.0", Description: "typography bound to the theme's heading, body and code roles", Exports: []string{"Title", "Heading", "Body", "Code", "Caption"}},
	{Name: "media", Version: "1.0.0", Description: "assets by ID, resolved to immutable digest-addressed URLs", Exports: []string{"Image", "Figure"}},
	{Name: "chart", Version: "1.0.0", Description: "static SVG charts that render deterministically", Exports: []string{"BarChart", "LineChart", "PieChart"}},
	{Name: "ready", Version: "1.0.0", Description: "the render-ready.v1 protocol hooks: resource and scene readiness", Exports: []string{"useResource", "useSceneReady"}},
}

// Agent is one entry of the AI agent catalogue: what an agent acting through the API does and
// which scopes it needs. Agent sessions and runs are out of scope for v1 (spec rule 7); the
// catalogue tells clients what exists and how a workspace configured it.
type Agent struct {
	Key             string          `json:"key"`
	Name            string          `json:"name"`
	Description     string          `json:"description"`
	Scopes          []string        `json:"scopes"`
	Operations      []string        `json:"operations"`
	DefaultSettings json.RawMessage `json:"default_settings"`
}

// Agents is the agent catalogue.
var Agents = []Agent{
	{Key: "deck-writer", Name: "Deck writer", Description: "drafts pages from an outline through mutation jobs",
		Scopes:          []string{"project:read", "page:read", "page:write", "component:read", "asset:read", "design-system:read"},
		Operations:      []string{"list-projects", "get-project", "list-project-pages", "get-standard-page", "get-runtime-kit"},
		DefaultSettings: json.RawMessage(`{"max_pages_per_run":10,"tone":"neutral"}`)},
	{Key: "layout-reviewer", Name: "Layout reviewer", Description: "validates pages and reports layout warnings without editing",
		Scopes:          []string{"project:read", "page:read", "preview:run"},
		Operations:      []string{"get-project", "list-project-pages", "get-standard-page"},
		DefaultSettings: json.RawMessage(`{"severity_threshold":"warning"}`)},
	{Key: "style-assistant", Name: "Style assistant", Description: "proposes themes and styles from a brand brief",
		Scopes:          []string{"project:read", "design-system:read", "design-system:write", "asset:read"},
		Operations:      []string{"list-platform-fonts", "get-project-configuration"},
		DefaultSettings: json.RawMessage(`{"palette_size":5}`)},
}

// AgentByKey finds a catalogue agent.
func AgentByKey(key string) (Agent, bool) {
	for _, a := range Agents {
		if a.Key == key {
			return a, true
		}
	}
	return Agent{}, false
}
