package preview

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/evanw/esbuild/pkg/api"

	"slidecells/shared/digest"
)

// The runtime is built by BuildRuntime from the committed sources in cell/preview/runtime/src
// and the npm packages its package-lock.json pins (installed by `make build` with npm ci into
// cell/preview/runtime/node_modules), into a directory the host loads at start (LoadRuntime).
// It holds no tenant data: its files are public under a build-versioned path.
const (
	runtimeSchema = "preview-runtime.v1"
	// RuntimeManifestName is the file listing a built runtime.
	RuntimeManifestName = "runtime.json"
	// configPlaceholder is where the host writes the document's configuration into the bootstrap.
	configPlaceholder = "/*PREVIEW_CONFIG*/"
	bootstrapFile     = "bootstrap.js"
	mainFile          = "main.js"
)

// runtimeEntries are the ES modules the runtime serves under fixed names: what the import map
// names ("react", "react/jsx-runtime", "@kit/<item>") and the runtime's main module.
var runtimeEntries = []struct{ src, out string }{
	{"src/vendor/react.js", "react"},
	{"src/vendor/react-jsx-runtime.js", "react-jsx-runtime"},
	{"src/main.js", "main"},
	{"src/kit/layout.jsx", "kit/layout"},
	{"src/kit/text.jsx", "kit/text"},
	{"src/kit/media.jsx", "kit/media"},
	{"src/kit/chart.jsx", "kit/chart"},
	{"src/kit/ready.jsx", "kit/ready"},
}

// KitItems are the runtime kit items the runtime provides as "@kit/<item>".
func KitItems() []string {
	var out []string
	for _, e := range runtimeEntries {
		if item, ok := strings.CutPrefix(e.out, "kit/"); ok {
			out = append(out, item)
		}
	}
	return out
}

// pinnedPackages are the npm packages the runtime bundles, at the versions package.json pins.
var pinnedPackages = map[string]string{"react": "18.3.1", "react-dom": "18.3.1"}

type runtimeManifest struct {
	Schema    string            `json:"schema"`
	HostBuild string            `json:"host_build"`
	Packages  map[string]string `json:"packages"`
	Files     map[string]string `json:"files"` // name -> sha256:<hex>
}

// BuildRuntime bundles the runtime from srcDir (cell/preview/runtime, with node_modules
// installed) into outDir, replacing what was there. React and react-dom are bundled once, in
// production mode, into a shared chunk the entries import, so "react" of the content and of the
// runtime is one instance.
func BuildRuntime(srcDir, outDir string) error {
	srcDir, err := filepath.Abs(srcDir)
	if err != nil {
		return err
	}
	for name, want := range pinnedPackages {
		var pkg struct {
			Version string `json:"version"`
		}
		b, err := os.ReadFile(filepath.Join(srcDir, "node_modules", name, "package.json"))
		if err == nil {
			err = json.Unmarshal(b, &pkg)
		}
		if err != nil {
			return fmt.Errorf("preview runtime: npm package %s is not installed in %s/node_modules (run `make build`, which runs npm ci there): %v", name, srcDir, err)
		}
		if pkg.Version != want {
			return fmt.Errorf("preview runtime: %s/node_modules has %s %s, package-lock pins %s (run `make build`, which runs npm ci there)", srcDir, name, pkg.Version, want)
		}
	}
	entries := make([]api.EntryPoint, len(runtimeEntries))
	for i, e := range runtimeEntries {
		entries[i] = api.EntryPoint{InputPath: filepath.Join(srcDir, e.src), OutputPath: e.out}
	}
	res := api.Build(api.BuildOptions{
		EntryPointsAdvanced: entries,
		AbsWorkingDir:       srcDir,
		Outdir:              "/out",
		Bundle:              true,
		Splitting:           true,
		Format:              api.FormatESModule,
		Platform:            api.PlatformBrowser,
		Target:              api.ES2020,
		JSX:                 api.JSXAutomatic,
		JSXImportSource:     "react",
		Define:              map[string]string{"process.env.NODE_ENV": `"production"`},
		MinifyWhitespace:    true,
		MinifySyntax:        true,
		MinifyIdentifiers:   true,
		LegalComments:       api.LegalCommentsEndOfFile,
		ChunkNames:          "chunks/[name]-[hash]",
		Charset:             api.CharsetUTF8,
		Write:               false,
		LogLevel:            api.LogLevelSilent,
	})
	if len(res.Errors) > 0 {
		msgs := api.FormatMessages(res.Errors, api.FormatMessagesOptions{Kind: api.ErrorMessage})
		return fmt.Errorf("preview runtime: esbuild: %s", strings.Join(msgs, "\n"))
	}
	files := map[string][]byte{}
	for _, f := range res.OutputFiles {
		rel, err := filepath.Rel("/out", f.Path)
		if err != nil || strings.HasPrefix(rel, "..") {
			return fmt.Errorf("preview runtime: esbuild wrote %s outside its output", f.Path)
		}
		files[filepath.ToSlash(rel)] = f.Contents
	}
	boot, err := os.ReadFile(filepath.Join(srcDir, "src", bootstrapFile))
	if err != nil {
		return fmt.Errorf("preview runtime: %w", err)
	}
	if err := checkBootstrap(boot); err != nil {
		return err
	}
	files[bootstrapFile] = boot

	man := runtimeManifest{Schema: runtimeSchema, HostBuild: HostBuild, Packages: pinnedPackages, Files: map[string]string{}}
	for name, b := range files {
		man.Files[name] = digest.Bytes(b)
	}
	mb, err := json.MarshalIndent(man, "", "  ")
	if err != nil {
		return err
	}
	tmp := outDir + ".tmp"
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	for name, b := range files {
		p := filepath.Join(tmp, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(tmp, RuntimeManifestName), append(mb, '\n'), 0o644); err != nil {
		return err
	}
	if err := os.RemoveAll(outDir); err != nil {
		return err
	}
	return os.Rename(tmp, outDir)
}

func checkBootstrap(b []byte) error {
	s := string(b)
	if strings.Count(s, configPlaceholder) != 1 {
		return fmt.Errorf("preview runtime: %s must hold %s exactly once", bootstrapFile, configPlaceholder)
	}
	if strings.Contains(strings.ToLower(s), "</script") || strings.Contains(s, "<!--") {
		return fmt.Errorf("preview runtime: %s cannot be inlined: it contains </script or <!--", bootstrapFile)
	}
	return nil
}

// Runtime is a built runtime, loaded into memory.
type Runtime struct {
	// Version names this build of the runtime in URLs: the first 16 hex digits of the digest of
	// its file list. Files are served under .../runtime/<Version>/<name> with long caching.
	Version   string
	bootstrap string
	files     map[string][]byte
	// modules are the runtime's ES module files in the order a document preloads them: the
	// main module first, then the others by name (its chunks, the import map's entries).
	modules []string
}

// ErrRuntimeMissing is returned by LoadRuntime when the directory holds no built runtime.
var ErrRuntimeMissing = errors.New("preview runtime files are missing")

// LoadRuntime reads and checks a runtime BuildRuntime wrote: every file listed, with its digest,
// built for this HostBuild.
func LoadRuntime(dir string) (*Runtime, error) {
	mb, err := os.ReadFile(filepath.Join(dir, RuntimeManifestName))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s has no %s (build it with `make build`, which runs `preview build-runtime`)", ErrRuntimeMissing, dir, RuntimeManifestName)
	}
	if err != nil {
		return nil, err
	}
	var man runtimeManifest
	if err := json.Unmarshal(mb, &man); err != nil || man.Schema != runtimeSchema {
		return nil, fmt.Errorf("preview runtime %s: %s is not a %s manifest", dir, RuntimeManifestName, runtimeSchema)
	}
	if man.HostBuild != HostBuild {
		return nil, fmt.Errorf("preview runtime %s was built for host build %q, this host is %q: rebuild it with `make build`", dir, man.HostBuild, HostBuild)
	}
	rt := &Runtime{files: map[string][]byte{}}
	names := make([]string, 0, len(man.Files))
	for name := range man.Files {
		names = append(names, name)
	}
	sort.Strings(names)
	h := sha256.New()
	for _, name := range names {
		if !validRuntimeName(name) {
			return nil, fmt.Errorf("preview runtime %s: file name %q is not allowed", dir, name)
		}
		b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(name)))
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrRuntimeMissing, err)
		}
		if digest.Bytes(b) != man.Files[name] {
			return nil, fmt.Errorf("preview runtime %s: %s does not match its digest (rebuild with `make build`)", dir, name)
		}
		rt.files[name] = b
		fmt.Fprintf(h, "%s %s\n", name, man.Files[name])
	}
	boot, ok := rt.files[bootstrapFile]
	if !ok {
		return nil, fmt.Errorf("%w: %s lists no %s", ErrRuntimeMissing, dir, bootstrapFile)
	}
	if err := checkBootstrap(boot); err != nil {
		return nil, err
	}
	delete(rt.files, bootstrapFile) // inlined into documents, never served as a file
	rt.bootstrap = string(boot)
	for _, e := range runtimeEntries {
		if _, ok := rt.files[e.out+".js"]; !ok {
			return nil, fmt.Errorf("%w: %s lists no %s.js", ErrRuntimeMissing, dir, e.out)
		}
	}
	rt.Version = hex.EncodeToString(h.Sum(nil))[:16]
	rt.modules = []string{mainFile}
	for _, name := range names {
		if name != mainFile && name != bootstrapFile && strings.HasSuffix(name, ".js") {
			rt.modules = append(rt.modules, name)
		}
	}
	return rt, nil
}

func validRuntimeName(name string) bool {
	if name == "" || strings.HasPrefix(name, "/") || slices.Contains(strings.Split(name, "/"), "..") {
		return false
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' || c == '/') {
			return false
		}
	}
	return true
}

// File returns a runtime file by name.
func (rt *Runtime) File(name string) ([]byte, bool) {
	b, ok := rt.files[name]
	return b, ok
}
