package store

import (
	"context"

	"github.com/jackc/pgx/v5"

	"slidecells/cell/auth"
	"slidecells/cell/catalog"
)

// AgentConfigs returns the workspace's stored agent configs by agent key.
func (st *Store) AgentConfigs(ctx context.Context, s auth.Scope) (map[string]catalog.AgentConfig, error) {
	list, err := rows(ctx, st.DB.Q(ctx), s, func(r pgx.Row) (catalog.AgentConfig, error) {
		var c catalog.AgentConfig
		err := r.Scan(&c.AgentKey, &c.Enabled, &c.Settings, &c.Version, &c.UpdatedBy, &c.UpdatedAt)
		return c, err
	}, `SELECT agent_key, enabled, settings, version, updated_by, updated_at FROM agent_configs WHERE workspace_id = $1`)
	out := make(map[string]catalog.AgentConfig, len(list))
	for _, c := range list {
		out[c.AgentKey] = c
	}
	return out, err
}
