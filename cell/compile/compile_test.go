package compile_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"slidecells/cell/compile"
)

var kit = []string{"layout", "text", "media", "chart", "ready"}

// components is a fake component store: key → module. Every module is
// published version 1 unless the test says otherwise.
type components map[string]compile.Module

func tsx(src string) compile.Module {
	return compile.Module{FileType: compile.TSX, Source: []byte(src), Version: 1}
}
func jsx(src string) compile.Module {
	return compile.Module{FileType: compile.JSX, Source: []byte(src), Version: 1}
}

// resolver records the keys it was asked for.
type resolver struct {
	mu    sync.Mutex
	comps components
	calls []string
}

func (r *resolver) Component(_ context.Context, key string) (compile.Module, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, key)
	m, ok := r.comps[key]
	if !ok {
		return compile.Module{}, fmt.Errorf("component %s: %w", key, compile.ErrNotFound)
	}
	return m, nil
}

func newCompiler(t testing.TB, slots int) *compile.Compiler {
	t.Helper()
	c, err := compile.New(compile.Options{Slots: slots, KitItems: kit})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// diag is what a test expects of a diagnostic: exact position and code, and
// a fragment of the message.
type diag struct {
	file      string
	line, col int
	code      compile.Code
	contains  string
}

func (d diag) match(got compile.Diagnostic) bool {
	return got.File == d.file && got.Line == d.line && got.Column == d.col && got.Code == d.code &&
		got.Severity == compile.SeverityError && strings.Contains(got.Message, d.contains)
}

const (
	hero   = "import { Title } from '@kit/text'\nexport default function Hero({ title }: { title: string }) { return <Title>{title}</Title> }\n"
	badge  = "export default function Badge() { return <span className=\"badge\">new</span> }\n"
	card   = "import Badge from '@components/badge'\nexport default function Card() { return <div><Badge /></div> }\n"
	simple = "export default function P() { return <div>page</div> }\n"
)

// chainOf builds components c1 → c2 → … → cn → (leaf).
func chainOf(n int) components {
	cs := components{}
	for i := 1; i <= n; i++ {
		src := "export default () => <i/>\n"
		if i < n {
			src = fmt.Sprintf("import C from '@components/c%d'\nexport default () => <C/>\n", i+1)
		}
		cs[fmt.Sprintf("c%d", i)] = tsx(src)
	}
	return cs
}

func TestCompile(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		kind   compile.Kind // page when empty
		entry  compile.Module
		comps  components
		limits compile.Limits
		// want are the error diagnostics, in order; none means success.
		want []diag
		// deps are the expected dependencies (key, version, hash, depth,
		// imports) on success or failure.
		deps []compile.Dependency
		// code holds fragments the output must contain; notCode must not.
		code, notCode []string
	}{
		{
			name:  "page importing components",
			entry: tsx("import Hero from '@components/hero'\nimport Badge from '@components/badge'\nexport default function P() { return <div><Hero title=\"x\" /><Badge /></div> }\n"),
			comps: components{"hero": tsx(hero), "badge": {FileType: compile.TSX, Source: []byte(badge), Hash: "draft-abc"}},
			deps: []compile.Dependency{
				{Key: "badge", Hash: "draft-abc", Depth: 1, Imports: []string{}},
				{Key: "hero", Version: 1, Depth: 1, Imports: []string{}},
			},
			code:    []string{`function Hero(`, `function Badge(`, `from "@kit/text"`, `from "react/jsx-runtime"`, "export {\n  P as default\n};"},
			notCode: []string{`from "@components/`},
		},
		{
			name:  "nested components",
			entry: tsx("import Card from '@components/card'\nexport default () => <Card />\n"),
			comps: components{"card": tsx(card), "badge": tsx(badge)},
			deps: []compile.Dependency{
				{Key: "badge", Version: 1, Depth: 2, Imports: []string{}},
				{Key: "card", Version: 1, Depth: 1, Imports: []string{"badge"}},
			},
			code: []string{`function Card(`, `function Badge(`},
		},
		{
			name:  "shared nested component is bundled once",
			entry: tsx("import Card from '@components/card'\nimport Badge from '@components/badge'\nexport default () => <><Card /><Badge /></>\n"),
			comps: components{"card": tsx(card), "badge": tsx(badge)},
			deps: []compile.Dependency{
				{Key: "badge", Version: 1, Depth: 1, Imports: []string{}},
				{Key: "card", Version: 1, Depth: 1, Imports: []string{"badge"}},
			},
			code: []string{`function Badge(`},
		},
		{
			name:    "kit and react imports stay external",
			entry:   tsx("import React, { useState } from 'react'\nimport { Slide, Stack } from '@kit/layout'\nimport { BarChart } from '@kit/chart'\nexport default function P() { const [n] = useState(1); return <Slide><Stack><BarChart data={[n]} /></Stack></Slide> }\n"),
			code:    []string{`from "react"`, `from "@kit/layout"`, `from "@kit/chart"`, `useState(1)`},
			notCode: []string{"createElement"},
		},
		{
			name:  "TSX with types, interfaces and import type",
			entry: tsx("import type { Props } from '@components/hero'\ninterface Q { n: number }\nconst f = (q: Q): number => q.n as number\nexport default function P<T>(p: T) { return <b>{f({ n: 1 })}</b> }\n"),
			code:  []string{"q.n"}, notCode: []string{"interface", "as number"},
		},
		{
			name:  "JSX page and JSX component",
			entry: jsx("import Card from '@components/card'\nexport default function P() { return <Card /> }\n"),
			comps: components{"card": jsx("export default function Card() { return <section>c</section> }\n")},
			deps:  []compile.Dependency{{Key: "card", Version: 1, Depth: 1, Imports: []string{}}},
			code:  []string{`jsx("section"`},
		},
		{
			name:  "component entry",
			kind:  compile.KindComponent,
			entry: compile.Module{Key: "card", FileType: compile.TSX, Source: []byte(card)},
			comps: components{"badge": tsx(badge)},
			deps:  []compile.Dependency{{Key: "badge", Version: 1, Depth: 1, Imports: []string{}}},
			code:  []string{"// @components/card", "Card as default"},
		},
		{
			name:  "export from a component is an import",
			entry: tsx("export { default } from '@components/badge'\n"),
			comps: components{"badge": tsx(badge)},
			deps:  []compile.Dependency{{Key: "badge", Version: 1, Depth: 1, Imports: []string{}}},
		},

		// Forbidden imports, one of each kind. Columns point at the
		// specifier's opening quote.
		{name: "forbidden relative", entry: tsx("import x from './x'\nexport default x\n"),
			want: []diag{{"page.tsx", 1, 15, compile.CodeImportForbidden, "relative imports"}}},
		{name: "forbidden parent relative", entry: tsx("import x from '../x'\nexport default x\n"),
			want: []diag{{"page.tsx", 1, 15, compile.CodeImportForbidden, "relative imports"}}},
		{name: "forbidden absolute path", entry: tsx("import x from '/etc/passwd'\nexport default x\n"),
			want: []diag{{"page.tsx", 1, 15, compile.CodeImportForbidden, "absolute paths"}}},
		{name: "forbidden https URL", entry: tsx("import x from 'https://esm.sh/react'\nexport default x\n"),
			want: []diag{{"page.tsx", 1, 15, compile.CodeImportForbidden, "URL imports"}}},
		{name: "forbidden data URL", entry: tsx("import x from 'data:text/javascript,export default 1'\nexport default x\n"),
			want: []diag{{"page.tsx", 1, 15, compile.CodeImportForbidden, "URL imports"}}},
		{name: "forbidden node builtin", entry: tsx("import fs from 'fs'\nexport default fs\n"),
			want: []diag{{"page.tsx", 1, 16, compile.CodeImportForbidden, "Node.js builtins"}}},
		{name: "forbidden node: builtin", entry: tsx("import { readFile } from 'node:fs/promises'\nexport default readFile\n"),
			want: []diag{{"page.tsx", 1, 26, compile.CodeImportForbidden, "Node.js builtins"}}},
		{name: "forbidden bare package", entry: tsx("import _ from 'lodash'\nexport default _\n"),
			want: []diag{{"page.tsx", 1, 15, compile.CodeImportForbidden, "packages are not available"}}},
		{name: "forbidden react-dom", entry: tsx("import d from 'react-dom'\nexport default d\n"),
			want: []diag{{"page.tsx", 1, 15, compile.CodeImportForbidden, "packages are not available"}}},
		{name: "forbidden react subpath", entry: tsx("import { jsx } from 'react/jsx-runtime'\nexport default jsx\n"),
			want: []diag{{"page.tsx", 1, 21, compile.CodeImportForbidden, `only "react" itself`}}},
		{name: "forbidden unknown kit item", entry: tsx("import { X } from '@kit/video'\nexport default X\n"),
			want: []diag{{"page.tsx", 1, 19, compile.CodeImportForbidden, `"video" is not a runtime kit item (known: chart, layout, media, ready, text)`}}},
		{name: "forbidden kit subpath", entry: tsx("import { X } from '@kit/text/x'\nexport default X\n"),
			want: []diag{{"page.tsx", 1, 19, compile.CodeImportForbidden, "not a runtime kit item"}}},
		{name: "forbidden component key", entry: tsx("import X from '@components/Hero'\nexport default X\n"),
			want: []diag{{"page.tsx", 1, 15, compile.CodeImportForbidden, "component key matches"}}},
		{name: "forbidden component subpath", entry: tsx("import X from '@components/hero/x'\nexport default X\n"),
			want: []diag{{"page.tsx", 1, 15, compile.CodeImportForbidden, "component key matches"}}},
		{name: "forbidden component key too long", entry: tsx("import X from '@components/abcdefghi'\nexport default X\n"),
			limits: compile.Limits{MaxKeyLength: 8},
			want:   []diag{{"page.tsx", 1, 15, compile.CodeImportForbidden, "at most 8 characters"}}},
		{name: "forbidden require", entry: tsx("const r = require('react')\nexport default r\n"),
			want: []diag{{"page.tsx", 1, 19, compile.CodeImportForbidden, `require("react") is not allowed`}}},
		{name: "forbidden dynamic import", entry: tsx("export default () => import('@components/hero')\n"),
			comps: components{"hero": tsx(hero)},
			want:  []diag{{"page.tsx", 1, 29, compile.CodeImportForbidden, `import("@components/hero") is not allowed`}}},
		{name: "forbidden dynamic import of an expression", entry: tsx("const u = 'https://x'\nexport default () => import(u)\n"),
			want: []diag{{"page.tsx", 2, 22, compile.CodeImportForbidden, "not a string literal"}}},
		{name: "forbidden JSX import source pragma", entry: tsx("/** @jsxImportSource preact */\nexport default () => <b />\n"),
			want: []diag{{"page.tsx", 2, 22, compile.CodeImportForbidden, `"preact/jsx-runtime"`}}},
		{name: "forbidden import in a nested component", entry: tsx("import Card from '@components/card'\nexport default Card\n"),
			comps: components{"card": tsx("// the card\nimport x from 'left-pad'\nexport default x\n")},
			want:  []diag{{"@components/card", 2, 15, compile.CodeImportForbidden, "packages are not available"}},
			deps:  []compile.Dependency{{Key: "card", Version: 1, Depth: 1, Imports: []string{}}}},
		{name: "forbidden import attributes", entry: tsx("import { Title } from '@kit/text' with { type: 'css' }\nexport default Title\n"),
			want: []diag{{"page.tsx", 1, 23, compile.CodeImportForbidden, "import attributes"}}},
		{name: "forbidden import with unused bindings", entry: tsx("import _ from 'lodash'\nexport default () => null\n"),
			want: []diag{{"page.tsx", 1, 15, compile.CodeImportForbidden, "packages are not available"}}},
		{name: "import type is erased before the check", entry: tsx("import type { Dict } from 'lodash'\nexport default (d: Dict) => d\n")},
		{name: "unused component import is a dependency", entry: tsx("import Badge from '@components/badge'\nexport default () => null\n"),
			comps:   components{"badge": tsx(badge)},
			deps:    []compile.Dependency{{Key: "badge", Version: 1, Depth: 1, Imports: []string{}}},
			notCode: []string{"function Badge"}},
		{name: "every forbidden import is reported", entry: tsx("import a from './a'\nimport b from 'b'\nexport default [a, b]\n"),
			want: []diag{{"page.tsx", 1, 15, compile.CodeImportForbidden, "relative"}, {"page.tsx", 2, 15, compile.CodeImportForbidden, "packages"}}},

		// Missing components and cycles.
		{name: "missing component", entry: tsx("import Nope from '@components/nope'\nexport default Nope\n"),
			want: []diag{{"page.tsx", 1, 18, compile.CodeComponentMissing, `component "nope" does not exist`}}},
		{name: "missing nested component", entry: tsx("import Card from '@components/card'\nexport default Card\n"),
			comps: components{"card": tsx("export { default } from '@components/gone'\n")},
			want:  []diag{{"@components/card", 1, 25, compile.CodeComponentMissing, `component "gone" does not exist: page.tsx → @components/card → @components/gone`}},
			deps:  []compile.Dependency{{Key: "card", Version: 1, Depth: 1, Imports: []string{"gone"}}}},
		{name: "cycle self", entry: tsx("import A from '@components/a'\nexport default A\n"),
			comps: components{"a": tsx("import A from '@components/a'\nexport default A\n")},
			want:  []diag{{"@components/a", 1, 15, compile.CodeImportCycle, "import cycle: @components/a → @components/a"}}},
		{name: "cycle of two", entry: tsx("import A from '@components/a'\nexport default A\n"),
			comps: components{"a": tsx("import B from '@components/b'\nexport default B\n"), "b": tsx("\nimport A from '@components/a'\nexport default A\n")},
			want:  []diag{{"@components/b", 2, 15, compile.CodeImportCycle, "import cycle: @components/a → @components/b → @components/a"}}},
		{name: "cycle of three", entry: tsx("import A from '@components/a'\nexport default A\n"),
			comps: components{"a": tsx("import B from '@components/b'\nexport default B\n"), "b": tsx("import C from '@components/c'\nexport default C\n"), "c": tsx("import A from '@components/a'\nexport default A\n")},
			want:  []diag{{"@components/c", 1, 15, compile.CodeImportCycle, "import cycle: @components/a → @components/b → @components/c → @components/a"}}},
		{name: "cycle through a component entry", kind: compile.KindComponent,
			entry: compile.Module{Key: "a", FileType: compile.TSX, Source: []byte("import B from '@components/b'\nexport default B\n")},
			comps: components{"b": tsx("import A from '@components/a'\nexport default A\n")},
			want:  []diag{{"@components/b", 1, 15, compile.CodeImportCycle, "import cycle: @components/a → @components/b → @components/a"}}},
		{name: "component entry importing itself", kind: compile.KindComponent,
			entry: compile.Module{Key: "a", FileType: compile.TSX, Source: []byte("import A from '@components/a'\nexport default A\n")},
			want:  []diag{{"@components/a", 1, 15, compile.CodeImportCycle, "import cycle: @components/a → @components/a"}}},

		// Limits.
		{name: "depth at the limit", entry: tsx("import C from '@components/c1'\nexport default C\n"),
			comps: chainOf(3), limits: compile.Limits{MaxImportDepth: 3}},
		{name: "depth over the limit", entry: tsx("import C from '@components/c1'\nexport default C\n"),
			comps: chainOf(4), limits: compile.Limits{MaxImportDepth: 3},
			want: []diag{{"@components/c3", 1, 15, compile.CodeLimit, "import chain of 4 components exceeds the limit of 3: page.tsx → @components/c1 → @components/c2 → @components/c3 → @components/c4"}}},
		{name: "depth over the limit through an already compiled component",
			// c2 is first reached at depth 1 (height 1: fine), then at
			// depth 3 through x1 → x2, which makes a chain of 4.
			entry: tsx("import C from '@components/c2'\nimport X from '@components/x1'\nexport default [C, X]\n"),
			comps: func() components {
				cs := chainOf(3)
				cs["x1"] = tsx("import X from '@components/x2'\nexport default X\n")
				cs["x2"] = tsx("import C from '@components/c2'\nexport default C\n")
				return cs
			}(),
			limits: compile.Limits{MaxImportDepth: 3},
			want:   []diag{{"@components/x2", 1, 15, compile.CodeLimit, "import chain of 4 components exceeds the limit of 3: page.tsx → @components/x1 → @components/x2 → @components/c2 → @components/c3"}}},
		{name: "dependencies at the limit", entry: tsx("import A from '@components/c1'\nexport default A\n"),
			comps: chainOf(3), limits: compile.Limits{MaxDependencies: 3}},
		{name: "dependencies over the limit", entry: tsx("import A from '@components/c1'\nimport B from '@components/hero'\nexport default [A, B]\n"),
			comps: func() components { cs := chainOf(3); cs["hero"] = tsx(hero); return cs }(), limits: compile.Limits{MaxDependencies: 3},
			// Components are resolved level by level: c1 and hero, then
			// c2; c3 is the fourth.
			want: []diag{{"@components/c2", 1, 15, compile.CodeLimit, "more than 3 components"}}},
		{name: "entry source over the limit", entry: tsx(simple + strings.Repeat("//", 50)),
			limits: compile.Limits{MaxSourceBytes: 100},
			want:   []diag{{"page.tsx", 0, 0, compile.CodeLimit, "the limit is 100"}}},
		{name: "component source over the limit", entry: tsx("import B from '@components/badge'\nexport default B\n" + strings.Repeat("//", 50)),
			comps: components{"badge": tsx(badge + strings.Repeat("//", 50))}, limits: compile.Limits{MaxSourceBytes: 1000, MaxComponentSourceBytes: 100},
			want: []diag{{"@components/badge", 0, 0, compile.CodeLimit, "the limit is 100"}}},

		// Syntax and link errors, in the right file and place.
		{name: "syntax error in the page", entry: tsx("export default function P() {\n  return <div>\n    <p>é😀 {1 +}</p></div>\n}\n"),
			// "    <p>é😀 {1 +" is 15 UTF-16 units: the "}" is column 16.
			want: []diag{{"page.tsx", 3, 16, compile.CodeSyntax, `Unexpected "}"`}}},
		{name: "syntax error in a nested component", entry: tsx("import Card from '@components/card'\nexport default Card\n"),
			comps: components{"card": tsx("import Badge from '@components/badge'\nexport default function Card() {\n  const n = ;\n  return <Badge />\n}\n"), "badge": tsx(badge)},
			want:  []diag{{"@components/card", 3, 13, compile.CodeSyntax, `Unexpected ";"`}}},
		{name: "TypeScript in a JSX file is a syntax error", entry: jsx("const n: number = 1\nexport default () => n\n"),
			want: []diag{{"page.jsx", 1, 8, compile.CodeSyntax, "Expected"}}},
		{name: "no default export", entry: tsx("export const x = 1\n"),
			want: []diag{{"page.tsx", 0, 0, compile.CodeEntry, "no default export"}}},
		{name: "import of a name a component does not export", entry: tsx("import { Nope } from '@components/badge'\nexport default Nope\n"),
			comps: components{"badge": tsx(badge)},
			want:  []diag{{"page.tsx", 1, 10, compile.CodeLink, `No matching export in "slidecells:@components/badge" for import "Nope"`}}},
		{name: "component of file type html", entry: tsx("import X from '@components/doc'\nexport default X\n"),
			comps: components{"doc": {FileType: compile.HTML, Source: []byte("<p>x</p>")}},
			want:  []diag{{"page.tsx", 1, 15, compile.CodeFileType, `file type "html"`}}},
		{name: "component entry of file type html", kind: compile.KindComponent, entry: compile.Module{Key: "x", FileType: compile.HTML, Source: []byte("<p>x</p>")},
			want: []diag{{"@components/x", 0, 0, compile.CodeFileType, "components are tsx or jsx"}}},
		{name: "page of an unknown file type", entry: compile.Module{FileType: "vue", Source: []byte("<template/>")},
			want: []diag{{"page.src", 0, 0, compile.CodeFileType, `file type "vue"`}}},

		// html pages.
		{name: "html page", entry: compile.Module{FileType: compile.HTML, Source: []byte("<!doctype html>\n<html><body><h1>Hi</h1><script>document.title='x'</script></body></html>\n")},
			code: []string{"<h1>Hi</h1>"}},
		{name: "html fragment", entry: compile.Module{FileType: compile.HTML, Source: []byte("<section><p>only a body</p></section>")}},
		{name: "html script src", entry: compile.Module{FileType: compile.HTML, Source: []byte("<p>x</p>\n  <script src=\"https://x/y.js\"></script>")},
			want: []diag{{"page.html", 2, 3, compile.CodeImportForbidden, "<script src>"}}},
		{name: "html module script", entry: compile.Module{FileType: compile.HTML, Source: []byte("<script type=module>import 'x'</script>")},
			want: []diag{{"page.html", 1, 1, compile.CodeImportForbidden, "type=\"module\""}}},
		{name: "html link and iframe", entry: compile.Module{FileType: compile.HTML, Source: []byte("<link rel=stylesheet href=a.css>\r\n<iframe src=x></iframe>")},
			want: []diag{{"page.html", 1, 1, compile.CodeImportForbidden, "<link>"}, {"page.html", 2, 1, compile.CodeImportForbidden, "<iframe>"}}},
		{name: "html empty", entry: compile.Module{FileType: compile.HTML, Source: []byte(" \n\t")},
			want: []diag{{"page.html", 0, 0, compile.CodeSyntax, "empty"}}},
		{name: "html not UTF-8", entry: compile.Module{FileType: compile.HTML, Source: []byte("<p>é\n ab\xffc</p>")},
			want: []diag{{"page.html", 2, 4, compile.CodeSyntax, "UTF-8"}}},
		{name: "html NUL byte", entry: compile.Module{FileType: compile.HTML, Source: []byte("<p>a\x00</p>")},
			want: []diag{{"page.html", 1, 5, compile.CodeSyntax, "NUL"}}},
		{name: "html over the limit", entry: compile.Module{FileType: compile.HTML, Source: []byte(strings.Repeat("<p>x</p>", 20))},
			limits: compile.Limits{MaxSourceBytes: 100},
			want:   []diag{{"page.html", 0, 0, compile.CodeLimit, "the limit is 100"}}},
	}
	c := newCompiler(t, 2)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			kind := tt.kind
			if kind == "" {
				kind = compile.KindPage
			}
			res, err := c.Compile(context.Background(), compile.Request{Kind: kind, Entry: tt.entry, Resolver: &resolver{comps: tt.comps}, Limits: tt.limits})
			if err != nil {
				t.Fatalf("Compile: %v", err)
			}
			var errs []compile.Diagnostic
			for _, d := range res.Diagnostics {
				if d.Severity == compile.SeverityError {
					errs = append(errs, d)
				}
			}
			if len(errs) != len(tt.want) {
				t.Fatalf("got %d errors, want %d:\n%s", len(errs), len(tt.want), list(res.Diagnostics))
			}
			for i, w := range tt.want {
				if !w.match(errs[i]) {
					t.Errorf("error %d = %v\nwant %s:%d:%d %s containing %q", i, errs[i], w.file, w.line, w.col, w.code, w.contains)
				}
			}
			if len(tt.want) > 0 {
				if res.OK() || res.Code != nil || res.Digest != "" {
					t.Errorf("failed compile: OK %v, %d bytes of code, digest %q", res.OK(), len(res.Code), res.Digest)
				}
			} else {
				if !res.OK() || len(res.Code) == 0 {
					t.Fatalf("compile failed: %s", list(res.Diagnostics))
				}
				sum := sha256.Sum256(res.Code)
				if want := "sha256:" + hex.EncodeToString(sum[:]); res.Digest != want {
					t.Errorf("digest %s, want %s", res.Digest, want)
				}
				checkImportsLeft(t, res)
			}
			if tt.deps != nil || tt.comps == nil {
				if !equalDeps(res.Dependencies, tt.deps) {
					t.Errorf("dependencies = %+v\nwant %+v", res.Dependencies, tt.deps)
				}
			}
			for _, s := range tt.code {
				if !strings.Contains(string(res.Code), s) {
					t.Errorf("output lacks %q:\n%s", s, res.Code)
				}
			}
			for _, s := range tt.notCode {
				if strings.Contains(string(res.Code), s) {
					t.Errorf("output has %q:\n%s", s, res.Code)
				}
			}
		})
	}
}

var importFrom = regexp.MustCompile(`(?m)(?:^import|^export)[^"'\n]*(?:from\s*)?["']([^"']+)["']`)

// checkImportsLeft asserts that a compiled ESM module imports only what the
// runtime provides.
func checkImportsLeft(t *testing.T, res *compile.Result) {
	t.Helper()
	if res.Format != compile.FormatESM {
		return
	}
	for _, m := range importFrom.FindAllStringSubmatch(string(res.Code), -1) {
		spec := m[1]
		if spec != "react" && spec != "react/jsx-runtime" && !(strings.HasPrefix(spec, "@kit/") && slices.Contains(kit, spec[5:])) {
			t.Errorf("output imports %q", spec)
		}
	}
}

func equalDeps(a, b []compile.Dependency) bool {
	return slices.EqualFunc(a, b, func(x, y compile.Dependency) bool {
		return x.Key == y.Key && x.Version == y.Version && x.Hash == y.Hash && x.Depth == y.Depth && slices.Equal(x.Imports, y.Imports)
	})
}

func list(ds []compile.Diagnostic) string {
	var b strings.Builder
	for _, d := range ds {
		b.WriteString("  " + d.String() + "\n")
	}
	return b.String()
}

// twentyComponents is a page importing 20 small components, every fourth of
// which imports one of two shared nested components. It serves the
// determinism test and the benchmark.
func twentyComponents() (compile.Module, components) {
	cs := components{
		"shared-a": tsx("import { Caption } from '@kit/text'\nexport default function SharedA({ n }: { n: number }) { return <Caption>shared a {n}</Caption> }\n"),
		"shared-b": tsx("export default function SharedB() { return <hr className=\"shared-b\" /> }\n"),
	}
	var imports, uses strings.Builder
	for i := range 20 {
		key := fmt.Sprintf("item-%02d", i)
		nested, use := "", ""
		switch i % 4 {
		case 0:
			nested, use = "import SharedA from '@components/shared-a'\n", fmt.Sprintf("<SharedA n={%d} />", i)
		case 1:
			nested, use = "import SharedB from '@components/shared-b'\n", "<SharedB />"
		}
		cs[key] = compile.Module{FileType: compile.TSX, Version: int64(i + 1), Source: []byte(fmt.Sprintf(
			"import { useState } from 'react'\nimport { Stack } from '@kit/layout'\n%s"+
				"type Props = { title?: string }\nexport default function Item%02d({ title = 'item %d' }: Props) {\n"+
				"  const [open] = useState(false)\n  return <Stack data-open={open}><h2>{title}</h2>%s</Stack>\n}\n",
			nested, i, i, use))}
		fmt.Fprintf(&imports, "import Item%02d from '@components/%s'\n", i, key)
		fmt.Fprintf(&uses, "      <Item%02d />\n", i)
	}
	page := tsx(fmt.Sprintf("import React from 'react'\nimport { Slide, Grid } from '@kit/layout'\n%s\nexport default function Page() {\n  return (\n    <Slide>\n     <Grid>\n%s     </Grid>\n    </Slide>\n  )\n}\n", imports.String(), uses.String()))
	return page, cs
}

func TestDeterministic(t *testing.T) {
	t.Parallel()
	page, cs := twentyComponents()
	req := func() compile.Request {
		return compile.Request{Kind: compile.KindPage, Entry: page, Resolver: &resolver{comps: cs}}
	}
	first, err := newCompiler(t, 2).Compile(context.Background(), req())
	if err != nil || !first.OK() {
		t.Fatalf("compile: %v %s", err, list(first.Diagnostics))
	}
	if len(first.Dependencies) != 22 || len(first.Imports) != 20 {
		t.Fatalf("%d dependencies, %d imports; want 22 and 20", len(first.Dependencies), len(first.Imports))
	}
	// Concurrent compiles on another compiler give the same bytes,
	// digest and dependency list every time.
	c := newCompiler(t, 2)
	var wg sync.WaitGroup
	results := make([]*compile.Result, 8)
	for i := range results {
		wg.Go(func() {
			r, err := c.Compile(context.Background(), req())
			if err != nil {
				t.Error(err)
				return
			}
			results[i] = r
		})
	}
	wg.Wait()
	for i, r := range results {
		if r == nil {
			continue
		}
		if string(r.Code) != string(first.Code) || r.Digest != first.Digest || !equalDeps(r.Dependencies, first.Dependencies) ||
			!slices.Equal(r.Imports, first.Imports) {
			t.Errorf("compile %d differs: digest %s, want %s", i, r.Digest, first.Digest)
		}
	}
	// A different version identity with the same source changes the
	// dependency list but not the code.
	other := components{}
	for k, m := range cs {
		m.Version, m.Hash = 0, "draft-"+k
		other[k] = m
	}
	r, err := c.Compile(context.Background(), compile.Request{Kind: compile.KindPage, Entry: page, Resolver: &resolver{comps: other}})
	if err != nil || r.Digest != first.Digest {
		t.Fatalf("same sources, other versions: digest %s, want %s (%v)", r.Digest, first.Digest, err)
	}
	if r.Dependencies[0].Hash != "draft-item-00" || r.Dependencies[0].Version != 0 {
		t.Errorf("dependency identity = %+v", r.Dependencies[0])
	}
	// A change in a nested component changes the digest.
	changed := components{}
	for k, m := range cs {
		changed[k] = m
	}
	changed["shared-b"] = tsx("export default function SharedB() { return <hr className=\"shared-c\" /> }\n")
	r, err = c.Compile(context.Background(), compile.Request{Kind: compile.KindPage, Entry: page, Resolver: &resolver{comps: changed}})
	if err != nil || !r.OK() || r.Digest == first.Digest {
		t.Errorf("nested change: digest %s (unchanged %v), err %v", r.Digest, r.Digest == first.Digest, err)
	}
}

func TestResolverCallsAreSequentialOncePerKey(t *testing.T) {
	t.Parallel()
	page, cs := twentyComponents()
	var calls [][]string
	for range 3 {
		r := &resolver{comps: cs}
		if _, err := newCompiler(t, 1).Compile(context.Background(), compile.Request{Kind: compile.KindPage, Entry: page, Resolver: r}); err != nil {
			t.Fatal(err)
		}
		calls = append(calls, r.calls)
	}
	// Level by level, each level in source order.
	var want []string
	for i := range 20 {
		want = append(want, fmt.Sprintf("item-%02d", i))
	}
	want = append(want, "shared-a", "shared-b")
	if !slices.Equal(calls[0], want) {
		t.Errorf("calls = %v, want %v", calls[0], want)
	}
	for _, c := range calls[1:] {
		if !slices.Equal(c, calls[0]) {
			t.Errorf("calls differ between compiles: %v vs %v", c, calls[0])
		}
	}
}

func TestResolverFailureIsAGoError(t *testing.T) {
	t.Parallel()
	boom := errors.New("database is down")
	r := compile.ResolverFunc(func(context.Context, string) (compile.Module, error) { return compile.Module{}, boom })
	res, err := newCompiler(t, 1).Compile(context.Background(), compile.Request{Kind: compile.KindPage,
		Entry: tsx("import A from '@components/a'\nexport default A\n"), Resolver: r})
	if !errors.Is(err, boom) || res != nil {
		t.Fatalf("Compile = %v, %v; want the resolver's error", res, err)
	}
}

func TestNoResolverMeansEveryComponentIsMissing(t *testing.T) {
	t.Parallel()
	res, err := newCompiler(t, 1).Compile(context.Background(), compile.Request{Kind: compile.KindPage,
		Entry: tsx("import A from '@components/a'\nexport default A\n")})
	if err != nil || len(res.Diagnostics) != 1 || res.Diagnostics[0].Code != compile.CodeComponentMissing {
		t.Fatalf("Compile = %+v, %v", res, err)
	}
}

func TestCancelledWhileWaitingForASlot(t *testing.T) {
	t.Parallel()
	c := newCompiler(t, 1)
	inside, release := make(chan struct{}), make(chan struct{})
	blocking := compile.ResolverFunc(func(ctx context.Context, key string) (compile.Module, error) {
		close(inside)
		<-release
		return tsx(badge), nil
	})
	entry := tsx("import B from '@components/b'\nexport default B\n")
	firstDone := make(chan error, 1)
	go func() {
		res, err := c.Compile(context.Background(), compile.Request{Kind: compile.KindPage, Entry: entry, Resolver: blocking})
		if err == nil && !res.OK() {
			err = fmt.Errorf("first compile failed: %s", list(res.Diagnostics))
		}
		firstDone <- err
	}()
	<-inside // the only slot is taken

	ctx, cancel := context.WithCancel(context.Background())
	waited := make(chan error, 1)
	go func() {
		_, err := c.Compile(ctx, compile.Request{Kind: compile.KindPage, Entry: tsx(simple)})
		waited <- err
	}()
	select {
	case err := <-waited:
		t.Fatalf("second compile did not wait for the slot: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	cancel()
	select {
	case err := <-waited:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled wait returned %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("cancelled wait did not return")
	}

	// An already ended context does not take a free slot either.
	close(release)
	if err := <-firstDone; err != nil {
		t.Fatal(err)
	}
	if _, err := c.Compile(ctx, compile.Request{Kind: compile.KindPage, Entry: tsx(simple)}); !errors.Is(err, context.Canceled) {
		t.Fatalf("compile with an ended context = %v", err)
	}
	if res, err := c.Compile(context.Background(), compile.Request{Kind: compile.KindPage, Entry: tsx(simple)}); err != nil || !res.OK() {
		t.Fatalf("slot not released: %v", err)
	}
}

func TestNew(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		opts compile.Options
		ok   bool
	}{
		{"defaults", compile.Options{}, true},
		{"kit", compile.Options{Slots: 4, KitItems: kit}, true},
		{"negative slots", compile.Options{Slots: -1}, false},
		{"bad kit item", compile.Options{KitItems: []string{"../x"}}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := compile.New(tt.opts)
			if (err == nil) != tt.ok {
				t.Fatalf("New(%+v) = %v", tt.opts, err)
			}
		})
	}
	if _, err := newCompiler(t, 1).Compile(context.Background(), compile.Request{Kind: "slide", Entry: tsx(simple)}); err == nil {
		t.Error("unknown kind accepted")
	}
	if _, err := newCompiler(t, 1).Compile(context.Background(), compile.Request{Kind: compile.KindComponent, Entry: compile.Module{Key: "Bad Key", FileType: compile.TSX, Source: []byte(simple)}}); err == nil {
		t.Error("component entry with an invalid key accepted")
	}
}

func TestDiagnosticsAreBounded(t *testing.T) {
	t.Parallel()
	var js, doc strings.Builder
	for i := range compile.MaxDiagnostics + 50 {
		fmt.Fprintf(&js, "import x%d from 'pkg-%d'\n", i, i)
		doc.WriteString("<link href=x>\n")
	}
	js.WriteString("export default 1\n")
	c := newCompiler(t, 1)
	for _, m := range []compile.Module{tsx(js.String()), {FileType: compile.HTML, Source: []byte(doc.String())}} {
		res, err := c.Compile(context.Background(), compile.Request{Kind: compile.KindPage, Entry: m})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Diagnostics) != compile.MaxDiagnostics || res.DiagnosticsOmitted != 50 || res.OK() {
			t.Errorf("%s: %d diagnostics, %d omitted", m.FileType, len(res.Diagnostics), res.DiagnosticsOmitted)
		}
	}
}

func TestCancelledDuringCompile(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := compile.ResolverFunc(func(context.Context, string) (compile.Module, error) {
		cancel()
		return tsx("import C from '@components/c'\nexport default C\n"), nil
	})
	_, err := newCompiler(t, 1).Compile(ctx, compile.Request{Kind: compile.KindPage,
		Entry: tsx("import B from '@components/b'\nexport default B\n"), Resolver: r})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Compile = %v, want context.Canceled", err)
	}
}
