package api

import (
	"encoding/json"
	"slidecells/cell/auth"
	"slidecells/cell/catalog"
	"slidecells/cell/content"
	"slidecells/cell/object"
	"testing"
	"time"
)

// TestViews: lists in views are never null, history entries carry no source.
func TestViews(t *testing.T) {
	now := time.Now()
	pv, _ := PageOf(auth.Scope{}, content.Page{Object: object.Object{ID: "pg_x"}, ProjectID: "prj_x", Labels: content.Labels{Key: "k"}, Version: 3})
	if pv.Tags == nil || pv.Version != 3 || pv.ID != "pg_x" || pv.ProjectID != "prj_x" {
		t.Fatalf("page view %+v", pv)
	}
	cv, _ := ComponentOf(auth.Scope{}, content.Component{Object: object.Object{ID: "cmp_x"}, DraftHash: "sha256:d", PublishedVersion: 2})
	if cv.Tags == nil || cv.DraftHash != "sha256:d" || cv.PublishedVersion != 2 {
		t.Fatalf("component view %+v", cv)
	}
	v := content.SourceVersion{Version: 2, NewSource: content.NewSource{FileType: "tsx", Source: "src", SourceDigest: "sha256:s",
		Dependencies: []content.Dependency{{ComponentID: "cmp_x", Key: "card", Version: 1, Depth: 1}}}, CreatedAt: now}
	full, hist := VersionOf(v, true), VersionOf(v, false)
	if full.Source != "src" || hist.Source != "" || len(full.Dependencies) != 1 || full.Dependencies[0] != (DependencyView{ComponentID: "cmp_x", Key: "card", Version: 1, Depth: 1}) {
		t.Fatalf("version views %+v / %+v", full, hist)
	}
	if none := VersionOf(content.SourceVersion{}, false); none.Dependencies == nil {
		t.Fatal("dependencies are null")
	}
	if d := DraftOf(content.Component{FileType: "tsx", DraftSource: "d", DraftHash: "sha256:h", Stamps: object.Stamps{UpdatedAt: now}}); d.Source != "d" ||
		d.SourceDigest != "sha256:h" || d.Version != 0 || d.Dependencies == nil || !d.CreatedAt.Equal(now) {
		t.Fatalf("draft view %+v", d)
	}
	if dv := DependenciesOf("pg_x", v); dv.ObjectID != "pg_x" || dv.Version != 2 || len(dv.Dependencies) != 1 {
		t.Fatalf("dependencies view %+v", dv)
	}
}

// TestConfigOf: a workspace's view of an agent is its stored configuration, else the
// catalogue's defaults (enabled, version 0, no update time); another agent's stored
// configuration never applies.
func TestConfigOf(t *testing.T) {
	writer, _ := catalog.AgentByKey("deck-writer")
	reviewer, _ := catalog.AgentByKey("layout-reviewer")
	at := time.Date(2025, 2, 3, 4, 5, 6, 0, time.UTC)
	stored := map[string]catalog.AgentConfig{
		"deck-writer": {AgentKey: "deck-writer", Enabled: false, Settings: json.RawMessage(`{"tone":"formal"}`), Version: 4, UpdatedBy: "usr_x", UpdatedAt: at},
	}
	for _, c := range []struct {
		name     string
		agent    catalog.Agent
		stored   map[string]catalog.AgentConfig
		enabled  bool
		settings string
		version  int64
		updated  *time.Time
	}{
		{"stored", writer, stored, false, `{"tone":"formal"}`, 4, &at},
		{"never set", reviewer, stored, true, string(reviewer.DefaultSettings), 0, nil},
		{"nothing stored", writer, nil, true, string(writer.DefaultSettings), 0, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			v := ConfigOf(c.agent, c.stored)
			if v.AgentKey != c.agent.Key || v.Enabled != c.enabled || string(v.Settings) != c.settings || v.Version != c.version {
				t.Fatalf("view %+v", v)
			}
			if (v.UpdatedAt == nil) != (c.updated == nil) || (c.updated != nil && !v.UpdatedAt.Equal(*c.updated)) {
				t.Fatalf("updated_at %v, want %v", v.UpdatedAt, c.updated)
			}
			raw, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			var m map[string]any
			_ = json.Unmarshal(raw, &m)
			if _, ok := m["updated_at"]; ok != (c.updated != nil) {
				t.Fatalf("updated_at shown %v: %s", ok, raw)
			}
		})
	}
}
