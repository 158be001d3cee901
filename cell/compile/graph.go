package compile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/evanw/esbuild/pkg/api"
)

const (
	// namespace is the esbuild plugin namespace every module lives in, so
	// esbuild never looks at a file system.
	namespace       = "slidecells"
	componentPrefix = "@components/"
	kitPrefix       = "@kit/"
)

// node is one module of the import graph.
type node struct {
	name  string // "page.tsx" or "@components/<key>"
	key   string // component key; "" for a page entry
	index int    // discovery order, for sorting diagnostics
	mod   Module
	state nodeState
	// imports are the component keys the module imports, in source order.
	imports []string
	// height is the length of the longest component chain below the node,
	// and deepest the import that starts it.
	height  int
	deepest string
}

type nodeState int

const (
	scanning nodeState = iota
	done
	missing
)

// graph walks the import graph depth first. The walk happens inside esbuild's
// resolve callbacks: each module is parsed on its own with every import left
// external, and the callback for an "@components/<key>" import resolves and
// parses that component before it returns. esbuild calls the callbacks of one
// file one after another in source order, so the walk, and every call of the
// resolver, is sequential and deterministic, and an error about an import
// (forbidden, missing, cycle, limit) is logged by esbuild at the import's own
// line and column.
type graph struct {
	ctx   context.Context
	req   Request
	kit   map[string]bool
	nodes map[string]*node // by key; the page entry under ""
	order []*node
	stack []*node
	diags []located
	// err is an infrastructure failure (resolver, context); it ends the walk.
	err error
	// stopped ends the walk after the dependency limit is hit.
	stopped bool
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

// walk parses the entry and everything it imports.
func (g *graph) walk(entry *node) {
	g.add(entry)
	g.visit(entry, true)
}

// visit parses n with its imports external, recursing into components from
// the resolve callback.
func (g *graph) visit(n *node, isEntry bool) {
	g.stack = append(g.stack, n)
	defer func() {
		g.stack = g.stack[:len(g.stack)-1]
		if n.state == scanning {
			n.state = done
		}
	}()

	limit := g.req.Limits.MaxComponentSourceBytes
	if isEntry {
		limit = g.req.Limits.MaxSourceBytes
	}
	if len(n.mod.Source) > limit {
		g.fileDiag(n, CodeLimit, fmt.Sprintf("source is %d bytes; the limit is %d", len(n.mod.Source), limit))
		return
	}
	depth := len(g.stack) - 1
	plugin := api.Plugin{Name: "slidecells-scan", Setup: func(pb api.PluginBuild) {
		pb.OnResolve(api.OnResolveOptions{Filter: ".*"}, func(args api.OnResolveArgs) (api.OnResolveResult, error) {
			if args.Kind == api.ResolveEntryPoint {
				return api.OnResolveResult{Path: n.name, Namespace: namespace}, nil
			}
			if msg := g.checkImport(n, depth, args); msg != nil {
				return api.OnResolveResult{Errors: []api.Message{*msg}}, nil
			}
			return api.OnResolveResult{Path: args.Path, External: true}, nil
		})
		pb.OnLoad(api.OnLoadOptions{Filter: ".*", Namespace: namespace}, func(api.OnLoadArgs) (api.OnLoadResult, error) {
			src := string(n.mod.Source)
			return api.OnLoadResult{Contents: &src, Loader: loaderOf(n.mod.FileType)}, nil
		})
	}}
	res := api.Build(api.BuildOptions{
		EntryPoints: []string{n.name},
		Bundle:      true,
		Write:       false,
		Format:      api.FormatESModule,
		Platform:    api.PlatformBrowser,
		Target:      api.ES2020,
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
	for _, m := range res.Errors {
		g.diags = append(g.diags, located{toDiagnostic(n.name, m, SeverityError, CodeSyntax), n.index})
	}
	for _, m := range res.Warnings {
		g.diags = append(g.diags, located{toDiagnostic(n.name, m, SeverityWarning, CodeWarning), n.index})
	}
	if isEntry && len(res.Errors) == 0 && !hasDefaultExport(res.Metafile) {
		g.fileDiag(n, CodeEntry, "the entry has no default export; the standard asks for a default-exported React component")
	}
}

func (g *graph) fileDiag(n *node, code Code, msg string) {
	g.diags = append(g.diags, located{Diagnostic{File: n.name, Severity: SeverityError, Code: code, Message: msg}, n.index})
}

// checkImport decides one import of n. It returns the error to log at the
// import, or nil to leave the import external.
func (g *graph) checkImport(n *node, depth int, args api.OnResolveArgs) *api.Message {
	if g.err != nil || g.stopped {
		return nil
	}
	spec := args.Path
	if args.Kind != api.ResolveJSImportStatement {
		return importError(CodeImportForbidden, fmt.Sprintf("%s is not allowed; modules are imported with static import declarations only", kindText(args.Kind, spec)))
	}
	switch {
	case spec == "react":
		return nil
	case strings.HasPrefix(spec, kitPrefix):
		item := spec[len(kitPrefix):]
		if g.kit[item] {
			return nil
		}
		known := make([]string, 0, len(g.kit))
		for k := range g.kit {
			known = append(known, k)
		}
		slices.Sort(known)
		return importError(CodeImportForbidden, fmt.Sprintf("import %q is forbidden: %q is not a runtime kit item (known: %s)", spec, item, strings.Join(known, ", ")))
	case strings.HasPrefix(spec, componentPrefix):
		key := spec[len(componentPrefix):]
		if !keyPattern.MatchString(key) || len(key) > g.req.Limits.MaxKeyLength {
			return importError(CodeImportForbidden, fmt.Sprintf("import %q is forbidden: a component key matches %s and has at most %d characters", spec, keyPattern, g.req.Limits.MaxKeyLength))
		}
		return g.component(n, depth, key)
	default:
		return importError(CodeImportForbidden, fmt.Sprintf("import %q is forbidden: %s", spec, forbiddenReason(spec)))
	}
}

// component handles n's import of the component key at depth+1.
func (g *graph) component(n *node, depth int, key string) *api.Message {
	if !slices.Contains(n.imports, key) {
		n.imports = append(n.imports, key)
	}
	limits := g.req.Limits
	if child, ok := g.nodes[key]; ok {
		switch child.state {
		case scanning:
			i := slices.Index(g.stack, child)
			return importError(CodeImportCycle, "import cycle: "+chain(g.stack[i:], child.name))
		case missing:
			return importError(CodeComponentMissing, fmt.Sprintf("component %q does not exist", key))
		}
		if d := depth + 1 + child.height; d > limits.MaxImportDepth {
			return importError(CodeLimit, fmt.Sprintf("import chain of %d components exceeds the limit of %d: %s", d, limits.MaxImportDepth, chain(g.stack, g.below(child)...)))
		}
		g.grow(n, child)
		return nil
	}
	if depth+1 > limits.MaxImportDepth {
		return importError(CodeLimit, fmt.Sprintf("import chain of %d components exceeds the limit of %d: %s", depth+1, limits.MaxImportDepth, chain(g.stack, componentPrefix+key)))
	}
	if g.resolved >= limits.MaxDependencies {
		g.stopped = true
		return importError(CodeLimit, fmt.Sprintf("more than %d components; the limit is %d", limits.MaxDependencies, limits.MaxDependencies))
	}
	if err := g.ctx.Err(); err != nil {
		g.err = err
		return nil
	}
	child := &node{name: componentPrefix + key, key: key}
	var mod Module
	var err error
	if g.req.Resolver == nil {
		err = ErrNotFound
	} else {
		mod, err = g.req.Resolver.Component(g.ctx, key)
	}
	if errors.Is(err, ErrNotFound) {
		child.state = missing
		g.add(child)
		return importError(CodeComponentMissing, fmt.Sprintf("component %q does not exist", key))
	}
	if err != nil {
		g.err = fmt.Errorf("compile: resolve component %q: %w", key, err)
		return nil
	}
	mod.Key = key
	child.mod = mod
	g.add(child)
	g.resolved++
	if mod.FileType != TSX && mod.FileType != JSX {
		child.state = done
		return importError(CodeFileType, fmt.Sprintf("component %q is of file type %q; components are tsx or jsx", key, mod.FileType))
	}
	g.visit(child, false)
	g.grow(n, child)
	return nil
}

// grow records that n imports child for the longest chain below n.
func (g *graph) grow(n, child *node) {
	if child.height+1 > n.height {
		n.height, n.deepest = child.height+1, child.key
	}
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
