package compile

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"

	"golang.org/x/sync/semaphore"
)

// FileType is the language of a module's source.
type FileType string

// The file types of the page and component standards. Components are tsx or
// jsx; pages may also be html.
const (
	TSX  FileType = "tsx"
	JSX  FileType = "jsx"
	HTML FileType = "html"
)

// Kind says what the entry of a compile is. It decides the entry's file name
// in diagnostics and whether html is allowed.
type Kind string

// The kinds of entry.
const (
	KindPage      Kind = "page"
	KindComponent Kind = "component"
)

// Module is one source as the caller resolved it.
type Module struct {
	// Key is the component key. For a page entry it is not used.
	Key      string
	FileType FileType
	Source   []byte
	// Version is the published version used, 0 for a draft.
	Version int64
	// Hash identifies a draft (or any other content the caller names by
	// hash); empty for a published version.
	Hash string
}

// Resolver returns the module to use for a component key. It decides which
// version: the published one, a draft, or a version pinned by a commit.
//
// A key the workspace does not have is reported with an error wrapping
// [ErrNotFound]; it becomes a COMPILE_COMPONENT_MISSING diagnostic. Any other
// error stops the compile and is returned from Compile. One compile calls its
// resolver from one goroutine at a time, at most once per key.
type Resolver interface {
	Component(ctx context.Context, key string) (Module, error)
}

// ResolverFunc adapts a function to a Resolver.
type ResolverFunc func(ctx context.Context, key string) (Module, error)

// Component calls f.
func (f ResolverFunc) Component(ctx context.Context, key string) (Module, error) { return f(ctx, key) }

// ErrNotFound is what a Resolver wraps when a component key does not exist.
var ErrNotFound = errors.New("compile: component not found")

// Limits bound one compile. Zero fields take the value of the default for the
// request's kind ([DefaultPageLimits] or [DefaultComponentLimits]); callers
// should pass the limits of the standard they publish.
type Limits struct {
	// MaxSourceBytes bounds the entry's source.
	MaxSourceBytes int
	// MaxComponentSourceBytes bounds each imported component's source.
	MaxComponentSourceBytes int
	// MaxDependencies bounds the number of distinct components in the
	// bundle, the entry not counted.
	MaxDependencies int
	// MaxImportDepth bounds the longest chain of component imports: the
	// entry is at depth 0, what it imports at depth 1.
	MaxImportDepth int
	// MaxKeyLength bounds a component key in bytes.
	MaxKeyLength int
}

// DefaultPageLimits and DefaultComponentLimits are the limits of version 1 of
// the page and component standards (cell/api/standards.go).
var (
	DefaultPageLimits      = Limits{MaxSourceBytes: 512 << 10, MaxComponentSourceBytes: 256 << 10, MaxDependencies: 64, MaxImportDepth: 8, MaxKeyLength: 64}
	DefaultComponentLimits = Limits{MaxSourceBytes: 256 << 10, MaxComponentSourceBytes: 256 << 10, MaxDependencies: 32, MaxImportDepth: 8, MaxKeyLength: 64}
)

func (l Limits) withDefaults(k Kind) Limits {
	d := DefaultPageLimits
	if k == KindComponent {
		d = DefaultComponentLimits
	}
	if l.MaxSourceBytes <= 0 {
		l.MaxSourceBytes = d.MaxSourceBytes
	}
	if l.MaxComponentSourceBytes <= 0 {
		l.MaxComponentSourceBytes = d.MaxComponentSourceBytes
	}
	if l.MaxDependencies <= 0 {
		l.MaxDependencies = d.MaxDependencies
	}
	if l.MaxImportDepth <= 0 {
		l.MaxImportDepth = d.MaxImportDepth
	}
	if l.MaxKeyLength <= 0 {
		l.MaxKeyLength = d.MaxKeyLength
	}
	return l
}

// Request is one compile.
type Request struct {
	Kind  Kind
	Entry Module
	// Resolver supplies the components; it may be nil when the entry
	// imports none.
	Resolver Resolver
	Limits   Limits
}

// Code is the stable, machine-readable class of a diagnostic.
type Code string

// The diagnostic codes. They are part of the API: clients branch on them.
const (
	// CodeSyntax: the module does not parse (TSX/JSX/TypeScript syntax,
	// or an html page that is not text).
	CodeSyntax Code = "COMPILE_SYNTAX"
	// CodeImportForbidden: an import the standard does not allow.
	CodeImportForbidden Code = "COMPILE_IMPORT_FORBIDDEN"
	// CodeComponentMissing: "@components/<key>" names no component.
	CodeComponentMissing Code = "COMPILE_COMPONENT_MISSING"
	// CodeImportCycle: a component imports itself, directly or not.
	CodeImportCycle Code = "COMPILE_IMPORT_CYCLE"
	// CodeLimit: a source, dependency count or import depth limit.
	CodeLimit Code = "COMPILE_LIMIT"
	// CodeFileType: a file type the standard does not allow here.
	CodeFileType Code = "COMPILE_FILE_TYPE"
	// CodeEntry: the entry breaks the entry contract (no default export).
	CodeEntry Code = "COMPILE_ENTRY"
	// CodeLink: the modules parse but do not fit together, for example an
	// import of a name a component does not export.
	CodeLink Code = "COMPILE_LINK"
	// CodeWarning: something esbuild warns about; never fails a compile.
	CodeWarning Code = "COMPILE_WARNING"
)

// Severity of a diagnostic.
type Severity string

// Severities.
const (
	SeverityError   Severity = "error"
	SeverityWarning Severity = "warning"
)

// Diagnostic is one compile problem.
type Diagnostic struct {
	// File is "page.<type>" for a page entry and "@components/<key>" for a
	// component.
	File string `json:"file"`
	// Line is 1-based; 0 when the problem concerns the whole file.
	Line int `json:"line"`
	// Column is 1-based and counts UTF-16 code units, as JavaScript
	// editors do; 0 when Line is 0.
	Column   int      `json:"column"`
	Severity Severity `json:"severity"`
	Code     Code     `json:"code"`
	Message  string   `json:"message"`
}

func (d Diagnostic) String() string {
	return fmt.Sprintf("%s:%d:%d: %s %s: %s", d.File, d.Line, d.Column, d.Severity, d.Code, d.Message)
}

// Dependency is one component in a bundle with the version identity used.
type Dependency struct {
	Key     string `json:"key"`
	Version int64  `json:"version,omitempty"`
	Hash    string `json:"hash,omitempty"`
	// Depth is the length of the shortest import chain from the entry.
	Depth int `json:"depth"`
	// Imports are the components this one imports, sorted.
	Imports []string `json:"imports"`
}

// Format names the kind of module in Result.Code.
type Format string

// Formats.
const (
	FormatESM  Format = "esm"
	FormatHTML Format = "html"
)

// Result is the outcome of a compile that could be attempted. When
// Diagnostics hold an error, Code and Digest are empty; Dependencies then
// list what was resolved before the compile stopped.
type Result struct {
	Code   []byte
	Format Format
	// Digest is the content address of Code, "sha256:<hex>".
	Digest string
	// Imports are the components the entry imports directly, sorted.
	Imports []string
	// Dependencies are all components bundled, recursively, sorted by key.
	Dependencies []Dependency
	// Diagnostics are sorted by file (entry first, then components in the
	// order they were found), line and column; at most MaxDiagnostics.
	Diagnostics []Diagnostic
	// DiagnosticsOmitted counts the diagnostics beyond MaxDiagnostics.
	DiagnosticsOmitted int
}

// MaxDiagnostics bounds Result.Diagnostics: a source full of errors gives a
// bounded answer.
const MaxDiagnostics = 100

// OK reports whether the compile produced a module.
func (r *Result) OK() bool {
	for _, d := range r.Diagnostics {
		if d.Severity == SeverityError {
			return false
		}
	}
	return true
}

// DefaultSlots is the number of concurrent compiles of a Compiler when
// Options.Slots is zero.
const DefaultSlots = 2

// Options configure a Compiler.
type Options struct {
	// Slots is the number of compiles that run at once; callers beyond it
	// wait. Zero means DefaultSlots.
	Slots int
	// KitItems are the runtime kit item names pages may import as
	// "@kit/<item>"; none when empty.
	KitItems []string
}

var (
	keyPattern = regexp.MustCompile(`^[a-z][a-z0-9-]*$`)
)

// Compiler compiles pages and components in a bounded number of slots. It is
// safe for concurrent use; share one per process.
type Compiler struct {
	slots *semaphore.Weighted
	kit   map[string]bool
}

// New returns a Compiler, or an error when the options are invalid.
func New(opts Options) (*Compiler, error) {
	if opts.Slots < 0 {
		return nil, fmt.Errorf("compile: slots must not be negative, got %d", opts.Slots)
	}
	if opts.Slots == 0 {
		opts.Slots = DefaultSlots
	}
	kit := make(map[string]bool, len(opts.KitItems))
	for _, it := range opts.KitItems {
		if !keyPattern.MatchString(it) {
			return nil, fmt.Errorf("compile: kit item %q does not match %s", it, keyPattern)
		}
		kit[it] = true
	}
	return &Compiler{slots: semaphore.NewWeighted(int64(opts.Slots)), kit: kit}, nil
}

// Compile compiles req.Entry with the components it imports. It waits for a
// free slot first and returns the context's error if the context ends while
// waiting.
//
// A tsx or jsx entry is bundled as the package documentation describes. An
// html page is checked by these rules and returned unchanged: at most
// Limits.MaxSourceBytes, valid UTF-8, no NUL byte, not only white space, and
// nothing loaded by reference — no <script src>, no module script, no
// <link>, <base>, <iframe>, <frame>, <object>, <embed> or <portal> element
// (COMPILE_IMPORT_FORBIDDEN). Inline classic scripts, styles and markup are
// the author's and pass as they are.
func (c *Compiler) Compile(ctx context.Context, req Request) (*Result, error) {
	if err := c.slots.Acquire(ctx, 1); err != nil {
		return nil, err
	}
	defer c.slots.Release(1)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	req.Limits = req.Limits.withDefaults(req.Kind)
	switch req.Kind {
	case KindPage:
	case KindComponent:
		if !keyPattern.MatchString(req.Entry.Key) || len(req.Entry.Key) > req.Limits.MaxKeyLength {
			return nil, fmt.Errorf("compile: entry key %q is not a component key", req.Entry.Key)
		}
	default:
		return nil, fmt.Errorf("compile: unknown kind %q", req.Kind)
	}
	var res *Result
	if req.Entry.FileType == HTML && req.Kind == KindPage {
		res = compileHTML(req)
	} else {
		var err error
		if res, err = c.compileJS(ctx, req); err != nil {
			return nil, err
		}
	}
	if n := len(res.Diagnostics); n > MaxDiagnostics {
		res.Diagnostics, res.DiagnosticsOmitted = res.Diagnostics[:MaxDiagnostics:MaxDiagnostics], n-MaxDiagnostics
	}
	return res, nil
}

func entryName(req Request) string {
	if req.Kind == KindComponent {
		return componentPrefix + req.Entry.Key
	}
	ft := string(req.Entry.FileType)
	if !slices.Contains([]FileType{TSX, JSX, HTML}, req.Entry.FileType) {
		ft = "src"
	}
	return "page." + ft
}
