// Package compile turns the source of a page or a component into the one
// JavaScript module the preview host loads, and tells what it was built from.
//
// It is the compile stage of the content model (DESIGN.md, "Content model"):
// a tsx or jsx entry is bundled in process with esbuild's Go API together with
// every component it imports, recursively, as "@components/<key>". Which
// version of a component is used is the caller's decision: the caller hands a
// [Resolver] that returns the module to use for a key (a published version or
// a draft), and the [Result] lists every component with the version identity
// that went into the bundle. That list is what a commit records and what the
// dependencies endpoints show.
//
// # Imports
//
// A module may import exactly three kinds of specifier, and only with static
// import or export-from declarations:
//
//   - "react", provided by the runtime;
//   - "@kit/<item>" where <item> is one of [Options.KitItems], provided by the
//     runtime kit;
//   - "@components/<key>" where <key> matches ^[a-z][a-z0-9-]*$ and is at most
//     [Limits.MaxKeyLength] bytes long; bundled into the output.
//
// Relative and absolute paths, URLs, node builtins, other bare packages,
// subpaths ("react/jsx-runtime", "@kit/text/x"), import attributes, require()
// and import() are COMPILE_IMPORT_FORBIDDEN. Every import an author wrote is
// checked, including one whose bindings are unused (TypeScript would drop it
// as possibly type-only); only "import type" is exempt. So a component
// imported but unused is still resolved and listed as a dependency, though
// the bundle leaves its code out. A component the resolver does not know is
// COMPILE_COMPONENT_MISSING; a component that imports itself, directly or
// through others, is COMPILE_IMPORT_CYCLE with the chain in the message.
// Source size per module, the number of distinct components and the length of
// the longest import chain are bounded by [Limits] (COMPILE_LIMIT).
//
// # Output
//
// The output is one ECMAScript module (format esm, platform browser, target
// es2020, not minified, no source map): the entry's exports are the module's
// exports, components are inlined, and the only imports left are "react",
// "react/jsx-runtime" (emitted for JSX by the automatic runtime, never written
// by authors) and "@kit/<item>". The preview host provides those through an
// import map and loads the module with <script type="module"> or import().
// The same inputs give the same bytes; [Result.Digest] is their SHA-256 in the
// project's digest form ("sha256:<hex>", shared/digest).
//
// An html page is not bundled: it is checked (size, UTF-8, no NUL byte, not
// blank, nothing loaded by reference; see [Compiler.Compile]) and returned
// unchanged as the module.
//
// # Failures
//
// A source that does not compile is not a Go error: Compile returns a Result
// whose Diagnostics say where and why, each with a stable [Code], the file
// ("page.tsx", "@components/<key>"), and a 1-based line and UTF-16 column
// (an import problem points at the import's specifier). All problems found
// are reported, up to [MaxDiagnostics]. A Go error means the compile could
// not be attempted or finished: an invalid request (unknown kind, a
// component entry without a valid key), the context ended, or the resolver
// failed for a reason other than [ErrNotFound].
//
// # What it must not do
//
// The package touches no file system, database or network and knows nothing
// of HTTP, workspaces or the API's standards: limits and kit items come in
// through [Options] and [Request]. Sources reach esbuild only as stdin and
// through an in-memory plugin namespace that resolves every import, so
// esbuild never looks at its working directory (verified with strace: a
// compile makes no file system call).
//
// Compiles run in a bounded number of slots shared by every caller of one
// [Compiler]; waiting for a slot honours the context. The resolver is called
// from one goroutine at a time per compile, once per key, in a deterministic
// order (level by level from the entry, each level in source order), so it
// may run inside a database transaction.
//
// A compile costs one esbuild build per import level plus one for the bundle;
// esbuild parses the modules of a level in parallel, so one slot may use
// more than one core for a moment.
package compile
