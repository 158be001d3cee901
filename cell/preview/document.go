package preview

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"

	"slidecells/cell/snapshot"
)

// rootID is the ID of the content root: a box of exactly the canvas size at the top left.
const rootID = "preview-root"

// bootConfig is what the bootstrap reads (see runtime/src/bootstrap.js).
type bootConfig struct {
	Ref          string            `json:"ref"`
	InputDigest  string            `json:"input_digest"`
	HostBuild    string            `json:"host_build"`
	FileType     string            `json:"file_type"`
	Kind         string            `json:"kind"`
	Main         string            `json:"main,omitempty"`
	Module       string            `json:"module,omitempty"`
	RootID       string            `json:"root_id"`
	Assets       map[string]string `json:"assets"`
	PlatformBase string            `json:"platform_base"`
}

// document is one built preview document with its content security policy.
type document struct {
	body []byte
	csp  string
}

// hostCSS fixes the canvas and turns animations off, as the renderer's policy does.
func hostCSS(c snapshot.Canvas) string {
	return fmt.Sprintf(`html,body{margin:0;padding:0;width:%[1]dpx;height:%[2]dpx;overflow:hidden;background:#fff}`+
		`#%[3]s{position:relative;width:%[1]dpx;height:%[2]dpx;overflow:hidden}`+
		`*,*::before,*::after{animation-duration:0s!important;animation-delay:0s!important;transition-duration:0s!important;transition-delay:0s!important;caret-color:transparent!important;scroll-behavior:auto!important}`,
		c.Width, c.Height, rootID)
}

// buildDocument writes the preview document of a snapshot. body is the module's bytes for an
// html page (nil otherwise); nonce is fresh per response.
func buildDocument(rt *Runtime, m *snapshot.Manifest, b Bases, nonce string, body []byte) (*document, error) {
	cfg := bootConfig{
		Ref: m.Ref, InputDigest: m.InputDigest, HostBuild: HostBuild, FileType: m.FileType, Kind: m.Entity.Kind,
		RootID: rootID, Assets: map[string]string{}, PlatformBase: b.Platform,
	}
	for _, a := range m.Assets {
		cfg.Assets[a.ID] = b.Blob(a.Hex())
	}
	var importMap []byte
	var preloads []string
	var scriptHashes []string
	var inner string
	switch m.FileType {
	case "tsx", "jsx":
		cfg.Main = b.Runtime + "/" + mainFile
		cfg.Module = b.Document + "/module.js"
		imports := map[string]string{
			"react":             b.Runtime + "/react.js",
			"react/jsx-runtime": b.Runtime + "/react-jsx-runtime.js",
		}
		for _, item := range KitItems() {
			imports["@kit/"+item] = b.Runtime + "/kit/" + item + ".js"
		}
		var err error
		if importMap, err = json.Marshal(map[string]any{"imports": imports}); err != nil {
			return nil, err
		}
		for _, name := range rt.modules {
			preloads = append(preloads, b.Runtime+"/"+name)
		}
		preloads = append(preloads, cfg.Module)
	case "html":
		frag, hashes, err := sanitizeBody(body)
		if err != nil {
			return nil, err
		}
		inner, scriptHashes = frag, hashes
	default:
		return nil, fmt.Errorf("snapshot %s: file type %q has no preview", m.Ref, m.FileType)
	}
	cj, err := json.Marshal(cfg) // escapes <, >, &, U+2028 and U+2029: safe inside a script
	if err != nil {
		return nil, err
	}
	// Every value below is ours: JSON (escaped for script context), a base64 nonce, paths of
	// checked IDs, and an html body that sanitizeBody rendered.
	var out strings.Builder
	out.WriteString("<!doctype html>\n<html lang=\"en\"><head>\n<meta charset=\"utf-8\">\n<meta name=\"robots\" content=\"noindex\">\n<title>Preview</title>\n")
	out.WriteString("<script nonce=\"" + nonce + "\">")
	out.WriteString(strings.Replace(rt.bootstrap, configPlaceholder, string(cj), 1))
	out.WriteString("</script>\n")
	if importMap != nil {
		out.WriteString("<script type=\"importmap\" nonce=\"" + nonce + "\">" + string(importMap) + "</script>\n")
	}
	// The runtime's modules and the snapshot's module, announced up front (after the import
	// map, which must precede any module fetch): the browser fetches and compiles them in
	// parallel while the document is still parsed and its styles load, instead of one level of
	// imports after another once the bootstrap starts the runtime (main.js, its chunks, the
	// import map's entries, the module). Nothing runs before the bootstrap imports the main
	// module; a fetch that failed here fails the same way there (the module map keeps it), so
	// the bootstrap's faults are unchanged.
	for _, u := range preloads {
		out.WriteString("<link rel=\"modulepreload\" href=\"" + html.EscapeString(u) + "\" data-preview-host=\"preload\">\n")
	}
	// The snapshot's fonts, fetched with the document instead of after its styles: the styles
	// declare them ("blobs/<hex>" below the document) and the bootstrap loads every declared
	// face before init, so each one is used; the request is the one the font load makes
	// (CORS, same-origin credentials), which the preload answers from memory.
	for _, f := range m.Fonts {
		out.WriteString("<link rel=\"preload\" as=\"font\" crossorigin href=\"" + html.EscapeString(b.Blob(f.Hex())) + "\" data-preview-host=\"preload\">\n")
	}
	out.WriteString("<style>" + hostCSS(m.Canvas) + "</style>\n")
	out.WriteString("<link rel=\"stylesheet\" href=\"" + html.EscapeString(b.Document+"/styles.css") + "\" data-preview-host=\"styles\">\n")
	out.WriteString("</head><body><div id=\"" + rootID + "\">" + inner + "</div></body></html>\n")
	return &document{body: []byte(out.String()), csp: contentSecurityPolicy(b, nonce, scriptHashes)}, nil
}

// contentSecurityPolicy allows scripts from the host's origin (the runtime and the snapshot's
// module), the configured runtime base and the bootstrap's nonce (plus the hashes of an html
// page's own inline scripts); no connections, frames, plugins, forms or base changes; and no
// framing by others.
func contentSecurityPolicy(b Bases, nonce string, scriptHashes []string) string {
	script := []string{"'self'", "'nonce-" + nonce + "'"}
	style := []string{"'self'", "'unsafe-inline'"}
	img := []string{"'self'", "data:", "blob:"}
	font := []string{"'self'", "data:"}
	if b.runtimeOrigin != "" {
		script = append(script, b.runtimeOrigin)
		style = append(style, b.runtimeOrigin)
	}
	if b.platformOrigin != "" {
		style = append(style, b.platformOrigin)
		img = append(img, b.platformOrigin)
		font = append(font, b.platformOrigin)
	}
	script = append(script, scriptHashes...)
	return strings.Join([]string{
		"default-src 'none'",
		"script-src " + strings.Join(script, " "),
		"style-src " + strings.Join(style, " "),
		"img-src " + strings.Join(img, " "),
		"font-src " + strings.Join(font, " "),
		"connect-src 'none'",
		"media-src 'none'",
		"frame-src 'none'",
		"child-src 'none'",
		"worker-src 'none'",
		"object-src 'none'",
		"manifest-src 'none'",
		"base-uri 'none'",
		"form-action 'none'",
		"frame-ancestors 'none'",
	}, "; ")
}

// sanitizeBody parses an html page's body as the children of the content root and writes it
// back: markup cannot close the root, open a comment over the rest of the document or add to
// <head>. Inline scripts stay (the compile stage allowed them) and are allowed by their hashes.
func sanitizeBody(src []byte) (string, []string, error) {
	ctx := &html.Node{Type: html.ElementNode, Data: "div", DataAtom: atom.Div}
	nodes, err := html.ParseFragment(bytes.NewReader(src), ctx)
	if err != nil {
		return "", nil, err
	}
	var out bytes.Buffer
	hashes := map[string]bool{}
	for _, n := range nodes {
		collectScripts(n, hashes)
		if err := html.Render(&out, n); err != nil {
			return "", nil, err
		}
	}
	list := make([]string, 0, len(hashes))
	for h := range hashes {
		list = append(list, h)
	}
	sort.Strings(list)
	return out.String(), list, nil
}

func collectScripts(n *html.Node, hashes map[string]bool) {
	if n.Type == html.ElementNode && n.DataAtom == atom.Script {
		var text strings.Builder
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			if c.Type == html.TextNode {
				text.WriteString(c.Data)
			}
		}
		sum := sha256.Sum256([]byte(text.String()))
		hashes["'sha256-"+base64.StdEncoding.EncodeToString(sum[:])+"'"] = true
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		collectScripts(c, hashes)
	}
}
