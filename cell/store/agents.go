package store

import (
	"context"
	"encoding/json"
	"time"

	"github.com/jackc/pgx/v5"

	"slidecells/cell/auth"
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

// AgentConfigs returns the workspace's stored agent configs by agent key.
func (st *Store) AgentConfigs(ctx context.Context, s auth.Scope) (map[string]AgentConfig, error) {
	list, err := rows(ctx, st.DB.Q(ctx), s, func(r pgx.Row) (AgentConfig, error) {
		var c AgentConfig
		err := r.Scan(&c.AgentKey, &c.Enabled, &c.Settings, &c.Version, &c.UpdatedBy, &c.UpdatedAt)
		return c, err
	}, `SELECT agent_key, enabled, settings, version, updated_by, updated_at FROM agent_configs WHERE workspace_id = $1`)
	out := make(map[string]AgentConfig, len(list))
	for _, c := range list {
		out[c.AgentKey] = c
	}
	return out, err
}
