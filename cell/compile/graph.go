package compile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/evanw/esbuild/pkg/api"
)

const (
	// namespace is the esbuild plugin namespace every module lives in, so
	// esbuild never looks at a file system.
	namespace       = "slidecells"
	componentPrefix = "@components/"
	kitPrefix       = "@kit/"
	// levelName is the synthetic entry of a scan; no module has this name.
	levelName = "<level>"
)

// node is one module of the import graph.
type node struct {
	name  string // "page.tsx" or "@components/<key>"
	key   string // component key; "" for a page entry
	index int    // discovery order, for sorting diagnostics
	mod   Module
	state nodeState
	// refs are the component imports of the module, in source order.
	refs []ref
	// height is the length of the longest component chain below the node
	// and deepest the component that starts it; set once the walk leaves
	// the node.
	height  int
	deepest string
	// done is set when the check walk leaves the node.
	done bool
}

// ref is one "@components/<key>" import with its position.
type ref struct {
	key          string
	line, column int
}

type nodeState int

const (
	resolved  nodeState = iota // module in hand, tsx or jsx
	missing                    // the resolver does not know the key
	wrongType                  // resolved, but not tsx or jsx
	tooDeep                    // first seen beyond the depth limit: not resolved
	overLimit                  // seen after the dependency limit: not resolved
)

// graph discovers the import graph and checks it.
//
// Discovery goes level by level: one esbuild build parses every module of a
// level at once with all imports left external, its resolve callback checks
// each specifier and records the component imports, and the new components
// are then resolved in order (level, importer, source order). A level costs
// one build whatever its width, the resolver is called from one goroutine,
// once per key, in a deterministic order, and esbuild logs a problem with a
// specifier at the import's line and column. Cycles and chain lengths are
// checked afterwards by a depth-first walk of the finished graph in source
// order.
type graph struct {
	ctx   context.Context
	req   Request
	kit   map[string]bool
	nodes map[string]*node // by key; the page entry under ""
	order []*node
	diags []located
	// err is an infrastructure failure (resolver, context).
	err error
	// resolved counts the components found.
	resolved int
}

// located is a diagnostic with the discovery index of its file.
type located struct {
	Diagnostic
	index int
}

func (g *graph) add(n *node) {
	n.index = len(g.order)
	g.order = append(g.order, n)
	g.nodes[n.key] = n
}

func (g *graph) fileDiag(n *node, code Code, msg string) {
	g.diags = append(g.diags, located{Diagnostic{File: n.name, Severity: SeverityError, Code: code, Message: msg}, n.index})
}

func (g *graph) refDiag(n *node, r ref, code Code, msg string) {
	g.diags = append(g.diags, located{Diagnostic{File: n.name, Line: r.line, Column: r.column, Severity: SeverityError, Code: code, Message: msg}, n.index})
}

// walk discovers and checks the graph below entry.
func (g *graph) walk(entry *node) {
	g.add(entry)
	level := []*node{entry}
	for depth := 0; len(level) > 0; depth++ {
		g.scan(level, depth == 0)
		var next []*node
		for _, n := range level {
			for _, r := range n.refs {
				if _, ok := g.nodes[r.key]; ok {
					continue
				}
				child := g.resolve(r.key, depth+1)
				if g.err != nil {
					return
				}
				if child.state == resolved {
					next = append(next, child)
				}
			}
		}
		level = next
	}
	g.check(entry, nil, map[*node]bool{}, &reported{})
}

// resolve asks the resolver for key, first seen at depth.
func (g *graph) resolve(key string, depth int) *node {
	n := &node{name: componentPrefix + key, key: key}
	defer g.add(n)
	limits := g.req.Limits
	switch {
	case depth > limits.MaxImportDepth:
		n.state = tooDeep
		return n
	case g.resolved >= limits.MaxDependencies:
		n.state = overLimit
		return n
	}
	if err := g.ctx.Err(); err != nil {
		g.err = err
		return n
	}
	var err error
	if g.req.Resolver == nil {
		err = ErrNotFound
	} else {
		n.mod, err = g.req.Resolver.Component(g.ctx, key)
	}
	switch {
	case errors.Is(err, ErrNotFound):
		n.state = missing
	case err != nil:
		g.err = fmt.Errorf("compile: resolve component %q: %w", key, err)
	case n.mod.FileType != TSX && n.mod.FileType != JSX:
		n.state = wrongType
		g.resolved++
	default:
		g.resolved++
	}
	n.mod.Key = key
	return n
}

// importMark is the Detail of the warning the scan logs at every component
// import; it is how the import's position comes back.
type importMark struct{ key string }

// scan parses the modules of one level with every import external, checks
// their specifiers and records their component imports.
func (g *graph) scan(level []*node, isEntry bool) {
	byName := make(map[string]*node, len(level))
	var entries []string
	for _, n := range level {
		limit := g.req.Limits.MaxComponentSourceBytes
		if isEntry {
			limit = g.req.Limits.MaxSourceBytes
		}
		if len(n.mod.Source) > limit {
			g.fileDiag(n, CodeLimit, fmt.Sprintf("source is %d bytes; the limit is %d", len(n.mod.Source), limit))
			continue
		}
		byName[n.name] = n
		entries = append(entries, n.name)
	}
	if len(entries) == 0 {
		return
	}
	// The entry comes in as esbuild's stdin, not as an entry point: esbuild
	// looks entry point paths up in its working directory, stdin it does not.
	// A level of components is parsed through a synthetic stdin that imports
	// them all: one output to link and print instead of one per component.
	// Tree shaking may drop their code from that output, which is thrown away;
	// what counts is that every module is parsed and every import resolved.
	stdin := &api.StdinOptions{Sourcefile: levelName, Loader: api.LoaderJS}
	if isEntry {
		n := byName[entries[0]]
		stdin.Contents, stdin.Sourcefile, stdin.Loader = string(n.mod.Source), n.name, loaderOf(n.mod.FileType)
	} else {
		var b strings.Builder
		for _, e := range entries {
			fmt.Fprintf(&b, "import %q;\n", e)
		}
		stdin.Contents = b.String()
	}
	// keys are each module's component imports in source order: esbuild
	// resolves the imports of one file one after another, files in parallel.
	var mu sync.Mutex
	keys := map[*node][]string{}
	plugin := api.Plugin{Name: "slidecells-scan", Setup: func(pb api.PluginBuild) {
		pb.OnResolve(api.OnResolveOptions{Filter: ".*"}, func(args api.OnResolveArgs) (api.OnResolveResult, error) {
			if !isEntry && args.Importer == levelName && args.Namespace == "" {
				return api.OnResolveResult{Path: args.Path, Namespace: namespace}, nil
			}
			key, msg := g.checkImport(args)
			if msg != nil {
				return api.OnResolveResult{Errors: []api.Message{*msg}}, nil
			}
			out := api.OnResolveResult{Path: args.Path, External: true}
			if n := byName[args.Importer]; key != "" && n != nil {
				mu.Lock()
				keys[n] = append(keys[n], key)
				mu.Unlock()
				out.Warnings = []api.Message{{Text: "component import", Detail: importMark{key}}}
			}
			return out, nil
		})
		loadModules(pb, byName)
	}}
	res := api.Build(api.BuildOptions{
		Stdin:    stdin,
		Bundle:   true,
		Write:    false,
		Format:   api.FormatESModule,
		Platform: api.PlatformBrowser,
		Target:   api.ES2020,
		// Preserve: the automatic runtime would add a "react/jsx-runtime"
		// import here that no author wrote and the check would reject.
		JSX: api.JSXPreserve,
		// Verbatim: TypeScript semantics drop an import whose bindings are
		// unused (they might be types). Here every import an author wrote
		// is checked and resolved; "import type" alone is exempt.
		TsconfigRaw:   `{"compilerOptions":{"verbatimModuleSyntax":true}}`,
		AbsWorkingDir: "/",
		LogLevel:      api.LogLevelSilent,
		LogOverride: map[string]api.LogLevel{
			"unsupported-dynamic-import": api.LogLevelError,
			"unsupported-require-call":   api.LogLevelError,
		},
		Metafile: isEntry,
		Plugins:  []api.Plugin{plugin},
	})
	// Positions of the component imports, by module and key.
	pos := map[*node]map[string]ref{}
	owner := func(m api.Message) *node {
		if m.Location != nil {
			if n := byName[strings.TrimPrefix(m.Location.File, namespace+":")]; n != nil {
				return n
			}
		}
		return level[0]
	}
	for _, m := range res.Errors {
		n := owner(m)
		g.diags = append(g.diags, located{toDiagnostic(n.name, m, SeverityError, CodeSyntax), n.index})
	}
	for _, m := range res.Warnings {
		n := owner(m)
		if mark, ok := m.Detail.(importMark); ok {
			d := toDiagnostic(n.name, m, SeverityWarning, CodeWarning)
			if pos[n] == nil {
				pos[n] = map[string]ref{}
			}
			pos[n][mark.key] = ref{key: mark.key, line: d.Line, column: d.Column}
			continue
		}
		g.diags = append(g.diags, located{toDiagnostic(n.name, m, SeverityWarning, CodeWarning), n.index})
	}
	for _, n := range level {
		for _, k := range keys[n] {
			r, ok := pos[n][k]
			if !ok {
				r = ref{key: k}
			}
			n.refs = append(n.refs, r)
		}
	}
	if isEntry && len(res.Errors) == 0 && !hasDefaultExport(res.Metafile) {
		g.fileDiag(level[0], CodeEntry, "the entry has no default export; the standard asks for a default-exported React component")
	}
}

// checkImport decides one import specifier. It returns the component key of
// an allowed "@components/<key>", or the error to log at the import.
func (g *graph) checkImport(args api.OnResolveArgs) (string, *api.Message) {
	spec := args.Path
	if args.Kind != api.ResolveJSImportStatement {
		return "", importError(CodeImportForbidden, fmt.Sprintf("%s is not allowed; modules are imported with static import declarations only", kindText(args.Kind, spec)))
	}
	if len(args.With) > 0 {
		return "", importError(CodeImportForbidden, fmt.Sprintf("import %q is forbidden: import attributes (with { … }) are not allowed", spec))
	}
	switch {
	case spec == "react":
		return "", nil
	case strings.HasPrefix(spec, kitPrefix):
		item := spec[len(kitPrefix):]
		if g.kit[item] {
			return "", nil
		}
		known := make([]string, 0, len(g.kit))
		for k := range g.kit {
			known = append(known, k)
		}
		slices.Sort(known)
		return "", importError(CodeImportForbidden, fmt.Sprintf("import %q is forbidden: %q is not a runtime kit item (known: %s)", spec, item, strings.Join(known, ", ")))
	case strings.HasPrefix(spec, componentPrefix):
		key := spec[len(componentPrefix):]
		if !keyPattern.MatchString(key) || len(key) > g.req.Limits.MaxKeyLength {
			return "", importError(CodeImportForbidden, fmt.Sprintf("import %q is forbidden: a component key matches %s and has at most %d characters", spec, keyPattern, g.req.Limits.MaxKeyLength))
		}
		return key, nil
	default:
		return "", importError(CodeImportForbidden, fmt.Sprintf("import %q is forbidden: %s", spec, forbiddenReason(spec)))
	}
}

// reported keeps the walk from repeating a diagnostic that is about the
// whole compile rather than one import.
type reported struct{ overLimit bool }

// check walks the graph depth first in source order, reporting at each
// import what is wrong with it: a missing component, a cycle, a chain over
// the depth limit, a component beyond the dependency limit, a wrong file
// type. It sets height and deepest on the way out.
func (g *graph) check(n *node, stack []*node, onStack map[*node]bool, rep *reported) {
	stack = append(stack, n)
	onStack[n] = true
	defer delete(onStack, n)
	limits := g.req.Limits
	for _, r := range n.refs {
		child := g.nodes[r.key]
		switch {
		case child == nil:
			continue
		case onStack[child]:
			i := slices.Index(stack, child)
			g.refDiag(n, r, CodeImportCycle, "import cycle: "+chain(stack[i:], child.name))
			continue
		}
		switch child.state {
		case missing:
			g.refDiag(n, r, CodeComponentMissing, fmt.Sprintf("component %q does not exist: %s", r.key, chain(stack, child.name)))
			continue
		case wrongType:
			g.refDiag(n, r, CodeFileType, fmt.Sprintf("component %q is of file type %q; components are tsx or jsx", r.key, child.mod.FileType))
			continue
		case overLimit:
			if !rep.overLimit {
				rep.overLimit = true
				g.refDiag(n, r, CodeLimit, fmt.Sprintf("more than %d components; the limit is %d", limits.MaxDependencies, limits.MaxDependencies))
			}
			continue
		case tooDeep:
			g.refDiag(n, r, CodeLimit, fmt.Sprintf("import chain of %d components exceeds the limit of %d: %s", len(stack), limits.MaxImportDepth, chain(stack, child.name)))
			continue
		}
		if !child.done {
			g.check(child, stack, onStack, rep)
		} else if d := len(stack) + child.height; d > limits.MaxImportDepth {
			g.refDiag(n, r, CodeLimit, fmt.Sprintf("import chain of %d components exceeds the limit of %d: %s", d, limits.MaxImportDepth, chain(stack, g.below(child)...)))
		}
		if child.height+1 > n.height {
			n.height, n.deepest = child.height+1, child.key
		}
	}
	n.done = true
}

// below is the longest chain from n down.
func (g *graph) below(n *node) []string {
	out := []string{n.name}
	for seen := 0; n.deepest != "" && seen <= len(g.order); seen++ {
		next, ok := g.nodes[n.deepest]
		if !ok {
			break
		}
		out = append(out, next.name)
		n = next
	}
	return out
}

func chain(stack []*node, tail ...string) string {
	parts := make([]string, 0, len(stack)+len(tail))
	for _, n := range stack {
		parts = append(parts, n.name)
	}
	parts = append(parts, tail...)
	return strings.Join(parts, " → ")
}

func importError(code Code, text string) *api.Message {
	return &api.Message{Text: text, Detail: code}
}

func kindText(k api.ResolveKind, spec string) string {
	switch k {
	case api.ResolveJSRequireCall:
		return fmt.Sprintf("require(%q)", spec)
	case api.ResolveJSDynamicImport:
		return fmt.Sprintf("import(%q)", spec)
	case api.ResolveJSRequireResolve:
		return fmt.Sprintf("require.resolve(%q)", spec)
	default:
		return fmt.Sprintf("importing %q this way", spec)
	}
}

// nodeBuiltins are the Node.js core modules; a browser has none of them.
var nodeBuiltins = map[string]bool{
	"assert": true, "async_hooks": true, "buffer": true, "child_process": true, "cluster": true,
	"console": true, "constants": true, "crypto": true, "dgram": true, "diagnostics_channel": true,
	"dns": true, "domain": true, "events": true, "fs": true, "http": true, "http2": true,
	"https": true, "inspector": true, "module": true, "net": true, "os": true, "path": true,
	"perf_hooks": true, "process": true, "punycode": true, "querystring": true, "readline": true,
	"repl": true, "stream": true, "string_decoder": true, "sys": true, "timers": true,
	"tls": true, "trace_events": true, "tty": true, "url": true, "util": true, "v8": true,
	"vm": true, "wasi": true, "worker_threads": true, "zlib": true,
}

// forbiddenReason explains why spec is not one of the allowed imports.
func forbiddenReason(spec string) string {
	const allowed = `allowed are "react", "@kit/<item>" and "@components/<key>"`
	first, _, _ := strings.Cut(spec, "/")
	switch {
	case spec == "." || spec == ".." || strings.HasPrefix(spec, "./") || strings.HasPrefix(spec, "../"):
		return "relative imports are not allowed; import other components as \"@components/<key>\""
	case strings.HasPrefix(spec, "/") || strings.HasPrefix(spec, `\`):
		return "absolute paths are not allowed; " + allowed
	case strings.HasPrefix(spec, "node:") || nodeBuiltins[first]:
		return "Node.js builtins do not exist in the preview; " + allowed
	case hasScheme(spec):
		return "URL imports are not allowed; " + allowed
	case first == "react":
		return "only \"react\" itself may be imported (the JSX runtime is added by the compiler); " + allowed
	default:
		return "packages are not available; " + allowed
	}
}

// hasScheme reports whether spec starts like a URL ("https:", "data:", …).
func hasScheme(spec string) bool {
	i := strings.IndexByte(spec, ':')
	if i <= 0 {
		return false
	}
	for j, r := range spec[:i] {
		alpha := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'
		if !alpha && (j == 0 || !(r >= '0' && r <= '9' || r == '+' || r == '-' || r == '.')) {
			return false
		}
	}
	return true
}

func loaderOf(ft FileType) api.Loader {
	if ft == JSX {
		return api.LoaderJSX
	}
	return api.LoaderTSX
}

// hasDefaultExport reads the exports of the single output from a metafile.
func hasDefaultExport(metafile string) bool {
	var meta struct {
		Outputs map[string]struct {
			Exports []string `json:"exports"`
		} `json:"outputs"`
	}
	if err := json.Unmarshal([]byte(metafile), &meta); err != nil {
		return false
	}
	for _, o := range meta.Outputs {
		if slices.Contains(o.Exports, "default") {
			return true
		}
	}
	return false
}

// imports are the keys of n's component imports.
func (n *node) imports() []string {
	out := make([]string, 0, len(n.refs))
	for _, r := range n.refs {
		if !slices.Contains(out, r.key) {
			out = append(out, r.key)
		}
	}
	return out
}
