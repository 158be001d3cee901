package catalog_test

import (
	"encoding/json"
	"regexp"
	"slices"
	"testing"

	"slidecells/cell/api"
	"slidecells/cell/catalog"
	"slidecells/cell/compile"
	"slidecells/cell/design"
	"slidecells/shared/directory"
)

// TestStandards: the page and component standards, as the specification states them: the file
// types each kind accepts, the fixed canvas, and limits equal to the compiler's defaults for the
// kind (the compiler enforces what the standard publishes).
func TestStandards(t *testing.T) {
	if len(catalog.Standards) != 2 {
		t.Fatalf("%d standards, want page and component", len(catalog.Standards))
	}
	for _, c := range []struct {
		kind      string
		fileTypes []string
		compile   compile.Limits
		scenes    bool
	}{
		{"page", []string{"tsx", "jsx", "html"}, compile.DefaultPageLimits, false},
		{"component", []string{"tsx", "jsx"}, compile.DefaultComponentLimits, true},
	} {
		t.Run(c.kind, func(t *testing.T) {
			std, ok := catalog.Standards[c.kind]
			if !ok {
				t.Fatalf("no %s standard", c.kind)
			}
			if std.Kind != c.kind || std.Version != "1" || !slices.Equal(std.FileTypes, c.fileTypes) || std.Entry == "" {
				t.Fatalf("standard %+v", std)
			}
			if std.Canvas != design.RenderCanvas {
				t.Fatalf("canvas %+v, want the render canvas %+v", std.Canvas, design.RenderCanvas)
			}
			l := std.Limits
			if l.MaxSourceBytes != c.compile.MaxSourceBytes || l.MaxDependencies != c.compile.MaxDependencies ||
				l.MaxImportDepth != c.compile.MaxImportDepth || l.MaxKeyLength != c.compile.MaxKeyLength {
				t.Fatalf("limits %+v differ from the compiler's %+v", l, c.compile)
			}
			if l.MaxAssetBytes <= 0 || l.MaxMetadataLength <= 0 {
				t.Fatalf("limits %+v", l)
			}
			if (l.MaxScenes > 0) != c.scenes {
				t.Fatalf("max scenes %d for a %s", l.MaxScenes, c.kind)
			}
			for _, want := range []string{"react", "@components/<key>", "@kit/<item>"} {
				if !slices.Contains(std.ImportsAllowed, want) {
					t.Fatalf("imports allowed %v lack %s", std.ImportsAllowed, want)
				}
			}
			// The JSON names clients read.
			raw, err := json.Marshal(std)
			if err != nil {
				t.Fatal(err)
			}
			var m map[string]any
			if err := json.Unmarshal(raw, &m); err != nil {
				t.Fatal(err)
			}
			for _, k := range []string{"kind", "version", "file_types", "entry", "imports_allowed", "canvas", "limits"} {
				if _, ok := m[k]; !ok {
					t.Fatalf("the standard's JSON has no %q: %s", k, raw)
				}
			}
			if _, ok := m["limits"].(map[string]any)["max_scenes"]; ok != c.scenes {
				t.Fatalf("max_scenes shown %v for a %s: %s", ok, c.kind, raw)
			}
		})
	}
}

var semver = regexp.MustCompile(`^\d+\.\d+\.\d+$`)

// TestRuntimeKit: kit items have unique names a compiler accepts as @kit/<item>, a version and
// exports.
func TestRuntimeKit(t *testing.T) {
	var names []string
	for _, it := range catalog.RuntimeKit {
		t.Run(it.Name, func(t *testing.T) {
			if slices.Contains(names, it.Name) {
				t.Fatalf("%s listed twice", it.Name)
			}
			if !semver.MatchString(it.Version) || it.Description == "" || len(it.Exports) == 0 {
				t.Fatalf("item %+v", it)
			}
			for i, e := range it.Exports {
				if e == "" || slices.Contains(it.Exports[:i], e) {
					t.Fatalf("exports %v", it.Exports)
				}
			}
		})
		names = append(names, it.Name)
	}
	if len(names) == 0 {
		t.Fatal("an empty kit")
	}
	if _, err := compile.New(compile.Options{KitItems: names}); err != nil {
		t.Fatalf("the compiler refuses the kit: %v", err)
	}
}

// TestAgents: every catalogue agent has a unique key, valid scopes, operations that exist in the
// API, default settings that are a JSON object, and scopes that cover every workspace operation
// it names (else an agent given exactly its catalogue scopes is refused by an operation the
// catalogue says it uses).
func TestAgents(t *testing.T) {
	ops := map[string]api.Operation{}
	for _, op := range api.New(api.Config{}).Operations() {
		ops[op.ID] = op
	}
	seen := map[string]bool{}
	for _, a := range catalog.Agents {
		t.Run(a.Key, func(t *testing.T) {
			if seen[a.Key] || a.Name == "" || a.Description == "" {
				t.Fatalf("agent %+v (listed twice: %v)", a, seen[a.Key])
			}
			seen[a.Key] = true
			if len(a.Scopes) == 0 || len(a.Operations) == 0 {
				t.Fatalf("agent %s has no scopes or no operations", a.Key)
			}
			for _, s := range a.Scopes {
				if !directory.ValidScope(s) {
					t.Errorf("scope %q is not a scope of the API", s)
				}
			}
			for _, id := range a.Operations {
				op, ok := ops[id]
				if !ok {
					t.Errorf("operation %q does not exist", id)
					continue
				}
				for _, need := range op.Scopes {
					if !slices.Contains(a.Scopes, string(need)) {
						t.Errorf("operation %s needs %s, which the agent's scopes %v lack", id, need, a.Scopes)
					}
				}
			}
			var settings map[string]any
			if err := json.Unmarshal(a.DefaultSettings, &settings); err != nil || settings == nil {
				t.Errorf("default settings %s are not a JSON object: %v", a.DefaultSettings, err)
			}
		})
	}
}

func TestAgentByKey(t *testing.T) {
	for _, want := range catalog.Agents {
		got, ok := catalog.AgentByKey(want.Key)
		if !ok || got.Key != want.Key || got.Name != want.Name {
			t.Fatalf("AgentByKey(%q) = %+v %v", want.Key, got, ok)
		}
	}
	for _, key := range []string{"", "Deck-Writer", "deck-writer ", "deck", "unknown"} {
		if got, ok := catalog.AgentByKey(key); ok || got.Key != "" {
			t.Fatalf("AgentByKey(%q) found %+v", key, got)
		}
	}
}
