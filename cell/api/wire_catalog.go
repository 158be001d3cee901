package api

import (
	"encoding/json"

	"slidecells/cell/catalog"
	"slidecells/cell/design"
)

// The platform's published catalogue as the API shows it, with its schema tags; each converts
// from catalog's struct of the same name.

// Standard is the page or component standard the backend enforces: what a client must produce.
type Standard struct {
	Kind           string         `json:"kind" enum:"page,component"`
	Version        string         `json:"version"`
	FileTypes      []string       `json:"file_types"`
	Entry          string         `json:"entry" doc:"the entry contract of a module"`
	ImportsAllowed []string       `json:"imports_allowed" doc:"import specifiers a module may use"`
	Canvas         design.Canvas  `json:"canvas"`
	Limits         catalog.Limits `json:"limits"`
}

// Agent is one entry of the AI agent catalogue: what an agent acting through the API does and
// which scopes it needs.
type Agent struct {
	Key             string          `json:"key"`
	Name            string          `json:"name"`
	Description     string          `json:"description"`
	Scopes          []string        `json:"scopes" doc:"scopes the agent's credential needs"`
	Operations      []string        `json:"operations" doc:"operation IDs the agent uses"`
	DefaultSettings json.RawMessage `json:"default_settings"`
}
