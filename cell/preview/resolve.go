package preview

import (
	"fmt"
	"net/url"
	"strings"

	"slidecells/shared/ids"
)

// BaseConfig is the trusted configuration of the browser-facing bases (render-execution.md,
// "Configuration": RENDER_RUNTIME_ASSET_BASE_URL, RENDER_PLATFORM_ASSET_BASE_URL). Empty means
// "same origin as the document, under the request's prefix", which works for both the
// renderer's browser (which reaches the host directly) and a public browser (which reaches it
// through the router's /preview/w/{ws} route).
type BaseConfig struct {
	RuntimeAssetBase  string
	PlatformAssetBase string
}

// Bases are where one document's browser loads things from.
type Bases struct {
	// Document is the path of the document: <prefix>/snapshots/<ref>. Its subresources
	// (module.js, styles.css, blobs/<hex>) live below it.
	Document string
	// Runtime is the base of the runtime's files, with the runtime version:
	// <RENDER_RUNTIME_ASSET_BASE_URL>/<version> or <prefix>/runtime/<version>.
	Runtime string
	// Platform is the base of platform assets: RENDER_PLATFORM_ASSET_BASE_URL or
	// <prefix>/platform.
	Platform string
	// origins are the configured bases' origins, for the content security policy.
	runtimeOrigin, platformOrigin string
}

// Blob is the URL of a snapshot blob (an asset or a font) below the document; the host serves
// it as the document's "blobs/<hex>" (host.go).
func (b Bases) Blob(hex string) string { return b.Document + "/blobs/" + hex }

// Prefix is the path prefix of the router's public preview route for a workspace; requests that
// reach the host directly have none.
func Prefix(workspaceID string) string {
	if workspaceID == "" {
		return ""
	}
	return "/preview/w/" + workspaceID
}

// Resolve is the one resolver of browser-facing bases: from trusted configuration and the
// request's prefix ("" or Prefix(ws)), never from the backend's or a loopback address. ref and
// the runtime version are checked by the caller.
func Resolve(c BaseConfig, prefix, ref, runtimeVersion string) Bases {
	b := Bases{
		Document: prefix + "/snapshots/" + ref,
		Runtime:  prefix + "/runtime/" + runtimeVersion,
		Platform: prefix + "/platform",
	}
	if c.RuntimeAssetBase != "" {
		b.Runtime = strings.TrimRight(c.RuntimeAssetBase, "/") + "/" + runtimeVersion
		b.runtimeOrigin = originOf(c.RuntimeAssetBase)
	}
	if c.PlatformAssetBase != "" {
		b.Platform = strings.TrimRight(c.PlatformAssetBase, "/")
		b.platformOrigin = originOf(c.PlatformAssetBase)
	}
	return b
}

func originOf(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return ""
	}
	return p.Scheme + "://" + p.Host
}

// CheckBase validates a configured base: an absolute http(s) URL without query, fragment or
// credentials. The error names what is wrong.
func CheckBase(u string) error {
	p, err := url.Parse(u)
	switch {
	case err != nil:
		return fmt.Errorf("%q is not a URL", u)
	case p.Scheme != "http" && p.Scheme != "https":
		return fmt.Errorf("%q: use an http or https URL", u)
	case p.Host == "":
		return fmt.Errorf("%q has no host", u)
	case p.User != nil:
		return fmt.Errorf("%q must not hold credentials", u)
	case p.RawQuery != "" || p.Fragment != "" || strings.ContainsAny(u, "?#"):
		return fmt.Errorf("%q must not have a query or fragment", u)
	}
	return nil
}

// validPrefixWorkspace reports whether a workspace ID taken from a request path is well formed.
func validPrefixWorkspace(ws string) bool { return ids.Valid(ids.Workspace, ws) }
