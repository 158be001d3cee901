package compile_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"slidecells/shared/testenv"

	"slidecells/cell/compile"
)

// nodeRuntime is a stand-in for what the preview host provides: "react",
// "react/jsx-runtime" and two kit items. Its jsx() calls function components
// at once, so rendering the default export runs every bundled component.
var nodeRuntime = map[string]string{
	"react/package.json":       `{"name":"react","type":"module","exports":{".":"./index.js","./jsx-runtime":"./jsx-runtime.js"}}`,
	"react/index.js":           "export function useState(v) { return [v, () => {}] }\nexport default { useState }\n",
	"react/jsx-runtime.js":     "export function jsx(type, props) { return typeof type === 'function' ? type(props) : { type, props } }\nexport const jsxs = jsx\nexport const Fragment = 'Fragment'\n",
	"@kit/layout/package.json": `{"name":"@kit/layout","type":"module","exports":"./index.js"}`,
	"@kit/layout/index.js":     "const el = (type) => (props) => ({ type, props })\nexport const Slide = el('Slide'), Stack = el('Stack'), Columns = el('Columns'), Grid = el('Grid'), Spacer = el('Spacer')\n",
	"@kit/text/package.json":   `{"name":"@kit/text","type":"module","exports":"./index.js"}`,
	"@kit/text/index.js":       "const el = (type) => (props) => ({ type, props })\nexport const Title = el('Title'), Heading = el('Heading'), Body = el('Body'), Code = el('Code'), Caption = el('Caption')\n",
}

// TestOutputRunsAsAModule loads the compiled page of 20 components in
// Node.js as an ES module, with a stub runtime under the specifiers the
// output imports, and renders it. It is skipped where node is not installed.
func TestOutputRunsAsAModule(t *testing.T) {
	t.Parallel()
	node := testenv.MustHaveNode(t)
	page, cs := twentyComponents()
	res, err := newCompiler(t, 1).Compile(context.Background(), compile.Request{Kind: compile.KindPage, Entry: page, Resolver: &resolver{comps: cs}})
	if err != nil || !res.OK() {
		t.Fatalf("compile: %v %s", err, list(res.Diagnostics))
	}
	dir := t.TempDir()
	for name, src := range nodeRuntime {
		path := filepath.Join(dir, "node_modules", filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "page.mjs"), res.Code, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "--input-type=module", "-e",
		"const m = await import('./page.mjs'); console.log(JSON.stringify(m.default({})))")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, out)
	}
	tree := string(out)
	for i := range 20 {
		if want := fmt.Sprintf(`"children":"item %d"`, i); !strings.Contains(tree, want) {
			t.Errorf("rendered tree lacks %s:\n%s", want, tree)
		}
	}
	if n := strings.Count(tree, `"type":"Caption"`); n != 5 {
		t.Errorf("shared-a rendered %d times, want 5", n)
	}
	if n := strings.Count(tree, `"className":"shared-b"`); n != 5 {
		t.Errorf("shared-b rendered %d times, want 5", n)
	}
}
