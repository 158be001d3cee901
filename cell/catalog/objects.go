package catalog

import (
	"encoding/json"
	"time"
)

// AgentConfig is a workspace's stored setting for one catalogue agent.
type AgentConfig struct {
	AgentKey  string
	Enabled   bool
	Settings  json.RawMessage
	Version   int64
	UpdatedBy string
	UpdatedAt time.Time
}
