package api

import (
	"context"
	"net/http"

	"slidecells/cell/auth"
	"slidecells/cell/catalog"
	"slidecells/cell/store"
	"slidecells/shared/problem"
)

// AgentKeyPath names a catalogue agent.
type AgentKeyPath struct {
	AgentKey string `path:"agent_key" maxLength:"64" pattern:"^[a-z][a-z0-9-]*$"`
}

// The catalogue lists (unnamed, so their schemas keep the names of their operations).
type (
	agentList = struct {
		Body struct {
			Items []catalog.Agent `json:"items"`
		}
	}
	agentConfigList = struct {
		Body struct {
			Items []AgentConfigView `json:"items"`
		}
	}
)

func (s *Server) registerAI(st *store.Store) {
	tags := []string{"ai"}
	Register(s, Operation{ID: "list-agent-catalog", Method: http.MethodGet, Path: "/ai/agent-catalog",
		Summary: "AI agent catalogue", Tags: tags, Access: Authenticated, ReadOnly: true},
		func(ctx context.Context, _ *struct{}) (*agentList, error) {
			out := &agentList{}
			out.Body.Items = catalog.Agents
			return out, nil
		})
	Register(s, Operation{ID: "get-agent-catalog-entry", Method: http.MethodGet, Path: "/ai/agent-catalog/{agent_key}",
		Summary: "One catalogue agent", Tags: tags, Access: Authenticated, ReadOnly: true},
		func(ctx context.Context, in *AgentKeyPath) (*struct{ Body catalog.Agent }, error) {
			a, ok := catalog.AgentByKey(in.AgentKey)
			if !ok {
				return nil, problem.ErrNotFound()
			}
			return &struct{ Body catalog.Agent }{Body: a}, nil
		})
	Scoped(s, Operation{ID: "list-agent-configs", Method: http.MethodGet, Path: "/ai/agent-configs",
		Summary: "The workspace's agent configurations", Tags: tags, Scopes: []auth.Permission{auth.WorkspaceRead}, ReadOnly: true},
		func(ctx context.Context, sc auth.Scope, _ *struct{}) (*agentConfigList, error) {
			stored, err := st.AgentConfigs(ctx, sc)
			if err != nil {
				return nil, err
			}
			out := &agentConfigList{}
			for _, a := range catalog.Agents {
				out.Body.Items = append(out.Body.Items, ConfigOf(a, stored))
			}
			return out, nil
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
