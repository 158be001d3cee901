package rendercontract

// ReadyBinding is the name of the CDP binding (Runtime.addBinding) the
// renderer installs before navigating: the readiness channel. The preview
// host's bootstrap captures it and deletes it from window before any content
// runs, and sends the whole state through it as a JSON string after every
// change.
const ReadyBinding = "__renderReadyV1"

// ReadyGlobal is the window property where the host keeps a frozen copy of
// the state for people debugging a preview in an ordinary browser. Content
// can overwrite it; nobody trusts it.
const ReadyGlobal = "__renderReady"

// MaxReadyStateBytes bounds one payload on the readiness channel; a larger
// one is a broken host (RENDER_CONTRACT_MISMATCH).
const MaxReadyStateBytes = 1 << 20

// SceneSwitchEvent is the CustomEvent type the renderer dispatches on window
// to request a scene; detail is SceneSwitchRequest.
const SceneSwitchEvent = "render-ready.v1:switch-scene"

// Init states.
const (
	InitPending = "pending"
	InitOK      = "ok"
	InitFailed  = "failed"
)

// Mount states.
const (
	MountPending = "pending"
	MountMounted = "mounted"
	MountFailed  = "failed"
)

// Scene receipt states.
const (
	SceneReady  = "ready"
	SceneFailed = "failed"
)

// ReadyState is one render-ready.v1 state as the host sends it through
// ReadyBinding.
type ReadyState struct {
	Protocol      string          `json:"protocol"`
	ArtifactID    string          `json:"artifact_id"`
	InputDigest   string          `json:"input_digest"`
	HostBuild     string          `json:"host_build"`
	Init          string          `json:"init"`
	InitError     *HostFault      `json:"init_error"`
	Mount         string          `json:"mount"`
	Resources     ResourceSummary `json:"resources"`
	Scenes        []string        `json:"scenes"`
	Scene         string          `json:"scene"`
	SceneReceipts []SceneReceipt  `json:"scene_receipts"`
	ContentFaults []ContentFault  `json:"content_faults"`
}

// HostFault is a host or network initialisation fault. Permanent faults
// (the artifact does not exist, the access was refused) are input problems;
// others are infrastructure.
type HostFault struct {
	Code      string `json:"code"`
	Message   string `json:"message"`
	Permanent bool   `json:"permanent"`
}

// ResourceCounts counts one kind of visual resource.
type ResourceCounts struct {
	Loaded  int `json:"loaded"`
	Failed  int `json:"failed"`
	Pending int `json:"pending"`
}

// ResourceSummary summarises the visual resources of the current scene.
type ResourceSummary struct {
	Fonts    ResourceCounts    `json:"fonts"`
	Images   ResourceCounts    `json:"images"`
	Other    ResourceCounts    `json:"other"`
	Failures []ResourceFailure `json:"failures,omitempty"`
}

// Pending is the number of resources of any kind still loading.
func (r ResourceSummary) Pending() int { return r.Fonts.Pending + r.Images.Pending + r.Other.Pending }

// Failed is the number of resources of any kind that failed.
func (r ResourceSummary) Failed() int { return r.Fonts.Failed + r.Images.Failed + r.Other.Failed }

// ResourceFailure names one failed resource without a URL (URLs may be
// signed).
type ResourceFailure struct {
	Kind      string `json:"kind"`
	Ref       string `json:"ref"`
	Permanent bool   `json:"permanent"`
}

// SceneSwitchRequest is the detail of SceneSwitchEvent.
type SceneSwitchRequest struct {
	Scene     string `json:"scene"`
	RequestID string `json:"request_id"`
}

// SceneReceipt is the host's answer to one scene switch request.
type SceneReceipt struct {
	RequestID string `json:"request_id"`
	Scene     string `json:"scene"`
	State     string `json:"state"`
	Message   string `json:"message,omitempty"`
}

// ContentFault is a deterministic content problem reported by the host.
type ContentFault struct {
	Code     string `json:"code"`
	Message  string `json:"message"`
	Scene    string `json:"scene"`
	Blocking bool   `json:"blocking"`
}

// CheckShape reports whether the object is determinable: the protocol is
// ours and every enumeration holds a known value. The message is safe to
// show.
func (s *ReadyState) CheckShape() (string, bool) {
	if s.Protocol != ReadinessProtocol {
		return "preview host speaks " + quoteShort(s.Protocol) + ", not " + ReadinessProtocol, false
	}
	switch s.Init {
	case InitPending, InitOK, InitFailed:
	default:
		return "render-ready.v1 init state " + quoteShort(s.Init) + " is undeterminable", false
	}
	switch s.Mount {
	case MountPending, MountMounted, MountFailed:
	default:
		return "render-ready.v1 mount state " + quoteShort(s.Mount) + " is undeterminable", false
	}
	for _, c := range []ResourceCounts{s.Resources.Fonts, s.Resources.Images, s.Resources.Other} {
		if c.Loaded < 0 || c.Failed < 0 || c.Pending < 0 {
			return "render-ready.v1 resource counts are negative", false
		}
	}
	for _, r := range s.SceneReceipts {
		if r.State != SceneReady && r.State != SceneFailed {
			return "render-ready.v1 scene receipt state " + quoteShort(r.State) + " is undeterminable", false
		}
	}
	return "", true
}

// Receipt returns the host's receipt for a scene switch request.
func (s *ReadyState) Receipt(requestID string) (SceneReceipt, bool) {
	for _, r := range s.SceneReceipts {
		if r.RequestID == requestID {
			return r, true
		}
	}
	return SceneReceipt{}, false
}

func quoteShort(s string) string {
	if len(s) > 40 {
		s = s[:40] + "…"
	}
	return `"` + s + `"`
}
