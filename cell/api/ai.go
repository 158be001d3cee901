package api

import (
	"context"
	"net/http"
	"slices"
	"strings"

	"slidecells/cell/auth"
	"slidecells/cell/catalog"
	"slidecells/cell/store"
	"slidecells/shared/problem"
)

// AgentKeyPath names a catalogue agent.
type AgentKeyPath struct {
	AgentKey string `path:"agent_key" maxLength:"64" pattern:"^[a-z][a-z0-9-]*$"`
}

func (s *Server) registerAI(st *store.Store) {
	tags := []string{"ai"}
	Register(s, Operation{ID: "list-agent-catalog", Method: http.MethodGet, Path: "/ai/agent-catalog",
		Summary: "AI agent catalogue", Tags: tags, Access: Authenticated, ReadOnly: true},
		func(ctx context.Context, in *ListQuery) (*Page[Agent], error) {
			items := mapSlice(catalog.Agents, func(a catalog.Agent) Agent { return Agent(a) })
			slices.SortFunc(items, func(a, b Agent) int { return strings.Compare(a.Key, b.Key) })
			return pageOf(items, *in, func(a Agent) string { return a.Key }), nil
		})
	Register(s, Operation{ID: "get-agent-catalog-entry", Method: http.MethodGet, Path: "/ai/agent-catalog/{agent_key}",
		Summary: "One catalogue agent", Tags: tags, Access: Authenticated, ReadOnly: true},
		func(ctx context.Context, in *AgentKeyPath) (*struct{ Body Agent }, error) {
			a, ok := catalog.AgentByKey(in.AgentKey)
			if !ok {
				return nil, problem.ErrNotFound()
			}
			return &struct{ Body Agent }{Body: Agent(a)}, nil
		})
	Scoped(s, Operation{ID: "list-agent-configs", Method: http.MethodGet, Path: "/ai/agent-configs",
		Summary: "The workspace's agent configurations", Tags: tags, Scopes: []auth.Permission{auth.WorkspaceRead}, ReadOnly: true},
		func(ctx context.Context, sc auth.Scope, in *ListQuery) (*Page[AgentConfigView], error) {
			stored, err := st.AgentConfigs(ctx, sc)
			if err != nil {
				return nil, err
			}
			items := make([]AgentConfigView, 0, len(catalog.Agents))
			for _, a := range catalog.Agents {
				items = append(items, ConfigOf(a, stored))
			}
			slices.SortFunc(items, func(a, b AgentConfigView) int { return strings.Compare(a.AgentKey, b.AgentKey) })
			return pageOf(items, *in, func(a AgentConfigView) string { return a.AgentKey }), nil
		})
	Scoped(s, Operation{ID: "get-agent-config", Method: http.MethodGet, Path: "/ai/agent-configs/{agent_key}",
		Summary: "The workspace's configuration of one agent", Tags: tags, Scopes: []auth.Permission{auth.WorkspaceRead}, ReadOnly: true},
		func(ctx context.Context, sc auth.Scope, in *AgentKeyPath) (*struct{ Body AgentConfigView }, error) {
			a, ok := catalog.AgentByKey(in.AgentKey)
			if !ok {
				return nil, problem.ErrNotFound()
			}
			stored, err := st.AgentConfigs(ctx, sc)
			if err != nil {
				return nil, err
			}
			return &struct{ Body AgentConfigView }{Body: ConfigOf(a, stored)}, nil
		})
}
