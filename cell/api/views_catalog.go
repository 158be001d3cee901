package api

import (
	"encoding/json"
	"slidecells/cell/catalog"
	"time"
)

// AgentConfigView is a workspace's configuration of one agent (its defaults when never set).
type AgentConfigView struct {
	AgentKey  string          `json:"agent_key"`
	Enabled   bool            `json:"enabled"`
	Settings  json.RawMessage `json:"settings"`
	Version   int64           `json:"version" doc:"0 when the workspace uses the catalogue defaults"`
	UpdatedAt *time.Time      `json:"updated_at,omitempty"`
}

// ConfigOf is a workspace's configuration of an agent: the stored one, or the defaults.
func ConfigOf(a catalog.Agent, stored map[string]catalog.AgentConfig) AgentConfigView {
	if c, ok := stored[a.Key]; ok {
		at := c.UpdatedAt
		return AgentConfigView{AgentKey: a.Key, Enabled: c.Enabled, Settings: c.Settings, Version: c.Version, UpdatedAt: &at}
	}
	return AgentConfigView{AgentKey: a.Key, Enabled: true, Settings: a.DefaultSettings}
}
