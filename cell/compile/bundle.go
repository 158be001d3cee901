package compile

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/evanw/esbuild/pkg/api"

	"slidecells/shared/digest"
)

// compileJS walks the import graph, then bundles it when the walk found no
// error.
func (c *Compiler) compileJS(ctx context.Context, req Request) (*Result, error) {
	entry := &node{name: entryName(req), mod: req.Entry}
	if req.Kind == KindComponent {
		entry.key = req.Entry.Key
	}
	g := &graph{ctx: ctx, req: req, kit: c.kit, nodes: map[string]*node{}}
	res := &Result{Format: FormatESM}
	if req.Entry.FileType != TSX && req.Entry.FileType != JSX {
		what := "pages are tsx, jsx or html"
		if req.Kind == KindComponent {
			what = "components are tsx or jsx"
		}
		g.add(entry)
		g.fileDiag(entry, CodeFileType, fmt.Sprintf("file type %q is not allowed; %s", req.Entry.FileType, what))
	} else {
		g.walk(entry)
	}
	if g.err != nil {
		return nil, g.err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	res.Imports = sortedCopy(entry.imports())
	res.Dependencies = dependencies(g, entry)
	if !hasError(g.diags) {
		g.bundle(entry, res)
	}
	slices.SortStableFunc(g.diags, func(a, b located) int {
		return cmp.Or(cmp.Compare(a.index, b.index), cmp.Compare(a.Line, b.Line), cmp.Compare(a.Column, b.Column))
	})
	for _, d := range g.diags {
		res.Diagnostics = append(res.Diagnostics, d.Diagnostic)
	}
	if !res.OK() {
		res.Code, res.Digest = nil, ""
	}
	return res, nil
}

// loadModules makes esbuild read the graph's modules (in their namespace) from byName.
func loadModules(pb api.PluginBuild, byName map[string]*node) {
	pb.OnLoad(api.OnLoadOptions{Filter: ".*", Namespace: namespace}, func(args api.OnLoadArgs) (api.OnLoadResult, error) {
		n := byName[args.Path]
		if n == nil {
			return api.OnLoadResult{}, fmt.Errorf("no module %q", args.Path)
		}
		src := string(n.mod.Source)
		return api.OnLoadResult{Contents: &src, Loader: loaderOf(n.mod.FileType)}, nil
	})
}

// bundle builds the checked graph into one ESM module.
func (g *graph) bundle(entry *node, res *Result) {
	byName := make(map[string]*node, len(g.order))
	for _, n := range g.order {
		byName[n.name] = n
	}
	plugin := api.Plugin{Name: "slidecells", Setup: func(pb api.PluginBuild) {
		pb.OnResolve(api.OnResolveOptions{Filter: ".*"}, func(args api.OnResolveArgs) (api.OnResolveResult, error) {
			switch spec := args.Path; {
			case spec == "react" || spec == "react/jsx-runtime":
				return api.OnResolveResult{Path: spec, External: true}, nil
			case strings.HasPrefix(spec, kitPrefix) && g.kit[spec[len(kitPrefix):]]:
				return api.OnResolveResult{Path: spec, External: true}, nil
			case byName[spec] != nil && strings.HasPrefix(spec, componentPrefix):
				return api.OnResolveResult{Path: spec, Namespace: namespace}, nil
			default:
				// Only a JSX pragma such as @jsxImportSource gets here:
				// everything an author wrote was checked by the walk.
				return api.OnResolveResult{Errors: []api.Message{*importError(CodeImportForbidden,
					fmt.Sprintf("import %q is forbidden: %s", spec, forbiddenReason(spec)))}}, nil
			}
		})
		loadModules(pb, byName)
	}}
	out := api.Build(api.BuildOptions{
		Stdin:           &api.StdinOptions{Contents: string(entry.mod.Source), Sourcefile: entry.name, Loader: loaderOf(entry.mod.FileType)},
		Bundle:          true,
		Write:           false,
		Format:          api.FormatESModule,
		Platform:        api.PlatformBrowser,
		Target:          api.ES2020,
		JSX:             api.JSXAutomatic,
		JSXImportSource: "react",
		Charset:         api.CharsetUTF8,
		TsconfigRaw:     "{}",
		AbsWorkingDir:   "/",
		LogLevel:        api.LogLevelSilent,
		Plugins:         []api.Plugin{plugin},
	})
	seen := make(map[Diagnostic]bool, len(g.diags))
	for _, d := range g.diags {
		seen[d.Diagnostic] = true
	}
	addAll := func(msgs []api.Message, sev Severity, code Code) {
		for _, m := range msgs {
			file := entry.name
			if m.Location != nil {
				file = strings.TrimPrefix(m.Location.File, namespace+":")
			}
			d := toDiagnostic(file, m, sev, code)
			if seen[d] {
				continue
			}
			seen[d] = true
			index := len(g.order)
			if n := byName[file]; n != nil {
				index = n.index
			}
			g.diags = append(g.diags, located{d, index})
		}
	}
	addAll(out.Errors, SeverityError, CodeLink)
	addAll(out.Warnings, SeverityWarning, CodeWarning)
	if len(out.Errors) > 0 {
		return
	}
	if len(out.OutputFiles) != 1 {
		g.fileDiag(entry, CodeLink, fmt.Sprintf("esbuild wrote %d files instead of one", len(out.OutputFiles)))
		return
	}
	res.Code = out.OutputFiles[0].Contents
	res.Digest = digest.Bytes(res.Code)
}

// dependencies lists the resolved components, with their shortest depth
// from the entry, sorted by key.
func dependencies(g *graph, entry *node) []Dependency {
	depth := map[*node]int{entry: 0}
	queue := []*node{entry}
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		for _, k := range n.imports() {
			c := g.nodes[k]
			if _, ok := depth[c]; c != nil && !ok {
				depth[c] = depth[n] + 1
				queue = append(queue, c)
			}
		}
	}
	var out []Dependency
	for _, n := range g.order {
		if n == entry || n.state != resolved && n.state != wrongType {
			continue
		}
		out = append(out, Dependency{Key: n.key, Version: n.mod.Version, Hash: n.mod.Hash, Depth: depth[n], Imports: sortedCopy(n.imports())})
	}
	slices.SortFunc(out, func(a, b Dependency) int { return strings.Compare(a.Key, b.Key) })
	return out
}

func sortedCopy(s []string) []string {
	out := append([]string{}, s...)
	slices.Sort(out)
	return out
}

func hasError(ds []located) bool {
	for _, d := range ds {
		if d.Severity == SeverityError {
			return true
		}
	}
	return false
}

// toDiagnostic converts an esbuild message about file. A code the plugin
// attached travels in Detail; esbuild's own messages get def, except the
// non-literal require()/import() it was told to treat as errors.
func toDiagnostic(file string, m api.Message, sev Severity, def Code) Diagnostic {
	d := Diagnostic{File: file, Severity: sev, Code: def, Message: m.Text}
	if code, ok := m.Detail.(Code); ok {
		d.Code = code
	} else if m.ID == "unsupported-dynamic-import" || m.ID == "unsupported-require-call" {
		d.Code = CodeImportForbidden
	}
	if loc := m.Location; loc != nil && loc.Line > 0 {
		d.Line = loc.Line
		d.Column = utf16Column(loc.LineText, loc.Column)
	}
	return d
}

// utf16Column turns esbuild's 0-based byte column in line into a 1-based
// column in UTF-16 code units.
func utf16Column(line string, byteCol int) int {
	if byteCol < 0 {
		byteCol = 0
	}
	if byteCol > len(line) {
		return byteCol + 1
	}
	col := 1
	for i := 0; i < byteCol; {
		r, size := utf8.DecodeRuneInString(line[i:])
		if r >= 0x10000 {
			col += 2
		} else {
			col++
		}
		i += size
	}
	return col
}
