package api

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"slidecells/cell/auth"
	"slidecells/cell/store"
	"slidecells/shared/problem"
)

// Agent is one entry of the AI agent catalogue: what an agent acting through the API does and
// which scopes it needs. Agent sessions and runs are out of scope for v1 (spec rule 7); the
// catalogue tells clients what exists and how a workspace configured it.
type Agent struct {
	Key             string          `json:"key"`
	Name            string          `json:"name"`
	Description     string          `json:"description"`
	Scopes          []string        `json:"scopes" doc:"scopes the agent's credential needs"`
	Operations      []string        `json:"operations" doc:"operation IDs the agent uses"`
	DefaultSettings json.RawMessage `json:"default_settings"`
}

var agentCatalog = []Agent{
	{Key: "deck-writer", Name: "Deck writer", Description: "drafts pages from an outline through mutation jobs",
		Scopes:          []string{"project:read", "page:read", "page:write", "component:read", "asset:read", "design-system:read"},
		Operations:      []string{"list-projects", "get-project", "list-project-pages", "get-standard-page", "get-runtime-kit"},
		DefaultSettings: json.RawMessage(`{"max_pages_per_run":10,"tone":"neutral"}`)},
	{Key: "layout-reviewer", Name: "Layout reviewer", Description: "validates pages and reports layout warnings without editing",
		Scopes:          []string{"project:read", "page:read", "preview:run"},
		Operations:      []string{"get-project", "list-project-pages", "get-standard-page"},
		DefaultSettings: json.RawMessage(`{"severity_threshold":"warning"}`)},
	{Key: "style-assistant", Name: "Style assistant", Description: "proposes themes and styles from a brand brief",
		Scopes:          []string{"design-system:read", "design-system:write", "asset:read"},
		Operations:      []string{"list-platform-fonts", "get-project-configuration"},
		DefaultSettings: json.RawMessage(`{"palette_size":5}`)},
}

func catalogAgent(key string) (Agent, bool) {
	for _, a := range agentCatalog {
		if a.Key == key {
			return a, true
		}
	}
	return Agent{}, false
}

// AgentConfigView is a workspace's configuration of one agent (its defaults when never set).
type AgentConfigView struct {
	AgentKey  string          `json:"agent_key"`
	Enabled   bool            `json:"enabled"`
	Settings  json.RawMessage `json:"settings"`
	Version   int64           `json:"version" doc:"0 when the workspace uses the catalogue defaults"`
	UpdatedAt *time.Time      `json:"updated_at,omitempty"`
}

func configView(a Agent, stored map[string]AgentConfigStored) AgentConfigView {
	if c, ok := stored[a.Key]; ok {
		at := c.UpdatedAt
		return AgentConfigView{AgentKey: a.Key, Enabled: c.Enabled, Settings: c.Settings, Version: c.Version, UpdatedAt: &at}
	}
	return AgentConfigView{AgentKey: a.Key, Enabled: true, Settings: a.DefaultSettings}
}

// AgentConfigStored is the stored form.
type AgentConfigStored = store.AgentConfig

// AgentKeyPath names a catalogue agent.
type AgentKeyPath struct {
	AgentKey string `path:"agent_key" maxLength:"64" pattern:"^[a-z][a-z0-9-]*$"`
}

func (s *Server) registerAI(st *store.Store) {
	tags := []string{"ai"}
	Register(s, Operation{ID: "list-agent-catalog", Method: http.MethodGet, Path: "/ai/agent-catalog",
		Summary: "AI agent catalogue", Tags: tags, Access: Authenticated, ReadOnly: true},
		func(ctx context.Context, _ *struct{}) (*struct {
			Body struct {
				Items []Agent `json:"items"`
			}
		}, error) {
			out := &struct {
				Body struct {
					Items []Agent `json:"items"`
				}
			}{}
			out.Body.Items = agentCatalog
			return out, nil
		})
	Register(s, Operation{ID: "get-agent-catalog-entry", Method: http.MethodGet, Path: "/ai/agent-catalog/{agent_key}",
		Summary: "One catalogue agent", Tags: tags, Access: Authenticated, ReadOnly: true},
		func(ctx context.Context, in *AgentKeyPath) (*struct{ Body Agent }, error) {
			a, ok := catalogAgent(in.AgentKey)
			if !ok {
				return nil, problem.ErrNotFound()
			}
			return &struct{ Body Agent }{Body: a}, nil
		})
	Scoped(s, Operation{ID: "list-agent-configs", Method: http.MethodGet, Path: "/ai/agent-configs",
		Summary: "The workspace's agent configurations", Tags: tags, Scopes: []auth.Permission{auth.WorkspaceRead}, ReadOnly: true},
		func(ctx context.Context, sc auth.Scope, _ *struct{}) (*struct {
			Body struct {
				Items []AgentConfigView `json:"items"`
			}
		}, error) {
			stored, err := st.AgentConfigs(ctx, sc)
			if err != nil {
				return nil, err
			}
			out := &struct {
				Body struct {
					Items []AgentConfigView `json:"items"`
				}
			}{}
			for _, a := range agentCatalog {
				out.Body.Items = append(out.Body.Items, configView(a, stored))
			}
			return out, nil
		})
	Scoped(s, Operation{ID: "get-agent-config", Method: http.MethodGet, Path: "/ai/agent-configs/{agent_key}",
		Summary: "The workspace's configuration of one agent", Tags: tags, Scopes: []auth.Permission{auth.WorkspaceRead}, ReadOnly: true},
		func(ctx context.Context, sc auth.Scope, in *AgentKeyPath) (*struct{ Body AgentConfigView }, error) {
			a, ok := catalogAgent(in.AgentKey)
			if !ok {
				return nil, problem.ErrNotFound()
			}
			stored, err := st.AgentConfigs(ctx, sc)
			if err != nil {
				return nil, err
			}
			return &struct{ Body AgentConfigView }{Body: configView(a, stored)}, nil
		})
}
