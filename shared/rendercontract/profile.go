package rendercontract

import "slidecells/shared/digest"

// PreviewHostBuild identifies the preview host build (cell/preview); every snapshot records it
// and the render profile pins it (preview_host_build), so a renderer refuses a document of
// another build. Bump it whenever the host's runtime (cell/preview/runtime/src,
// package-lock.json) or its document changes: a built runtime records the build it was built
// for and the host refuses another.
const PreviewHostBuild = "preview-host-4"

// RenderProfile is the execution environment that decides how content
// renders. A renderer computes it at start; its digest is the environment
// digest that requests must name in render_profile_digest and that results
// carry. Log level, concurrency and addresses are deliberately not part of
// it.
type RenderProfile struct {
	ContractVersion   string `json:"contract_version"`
	ReadinessProtocol string `json:"readiness_protocol"`
	// SceneProtocol is the component scene protocol (part of
	// render-ready.v1).
	SceneProtocol   string `json:"scene_protocol"`
	ResultSchema    string `json:"result_schema"`
	DiagnosisSchema string `json:"diagnosis_schema"`
	// BrowserLibrary is the exact chromedp module version.
	BrowserLibrary string `json:"browser_library"`
	// BrowserBuild is what the browser binary reports for --version.
	BrowserBuild string `json:"browser_build"`
	HeadlessMode string `json:"headless_mode"`
	// LaunchFlags are the exact flags, sorted, with per-attempt paths and
	// deployment addresses replaced by placeholders.
	LaunchFlags      []string `json:"launch_flags"`
	Sandbox          string   `json:"sandbox"`
	ImageDigest      string   `json:"image_digest,omitempty"`
	OS               string   `json:"os"`
	Arch             string   `json:"arch"`
	FontsDigest      string   `json:"fonts_digest"`
	FontConfigDigest string   `json:"fontconfig_digest"`
	// PreviewHostBuild is pinned by the manifest; when set, the host's
	// reported host_build must equal it.
	PreviewHostBuild  string `json:"preview_host_build,omitempty"`
	Locale            string `json:"locale"`
	Timezone          string `json:"timezone"`
	ColorScheme       string `json:"color_scheme"`
	DSFPolicy         string `json:"dsf_policy"`
	AnimationPolicy   string `json:"animation_policy"`
	EngineVersion     string `json:"engine_version"`
	DiagnosticsScript string `json:"diagnostics_script"`
}

// Digest is the environment digest of the profile.
func (p RenderProfile) Digest() (string, error) { return digest.JSON(p) }
