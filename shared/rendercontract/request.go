package rendercontract

import (
	"fmt"
	"math"
	"net/url"
	"strings"
	"time"

	"slidecells/shared/digest"
)

// Operation is one of the three render operations.
type Operation string

// Operations.
const (
	OpPageCapture       Operation = "page.capture"
	OpPageDiagnose      Operation = "page.diagnose"
	OpComponentDiagnose Operation = "component.diagnose"
)

// Operations lists every operation, for capabilities.
var Operations = []Operation{OpPageCapture, OpPageDiagnose, OpComponentDiagnose}

// Valid reports whether o is a known operation.
func (o Operation) Valid() bool {
	return o == OpPageCapture || o == OpPageDiagnose || o == OpComponentDiagnose
}

// DefaultScene is the scene every page and component has; it always runs
// first.
const DefaultScene = "default"

// Viewport is the fixed canvas in CSS pixels and the device scale factor.
type Viewport struct {
	Width             int     `json:"width"`
	Height            int     `json:"height"`
	DeviceScaleFactor float64 `json:"device_scale_factor"`
}

// PhysicalSize is the size of the captured image in device pixels.
func (v Viewport) PhysicalSize() (w, h int) {
	return int(math.Round(float64(v.Width) * v.DeviceScaleFactor)), int(math.Round(float64(v.Height) * v.DeviceScaleFactor))
}

// Check enforces the canvas limits. It returns RENDER_OUTPUT_LIMIT_EXCEEDED
// for a canvas beyond the limits and RENDER_CONTRACT_MISMATCH for a value
// that is not a canvas at all.
func (v Viewport) Check() *Error {
	if v.Width <= 0 || v.Height <= 0 || math.IsNaN(v.DeviceScaleFactor) ||
		v.DeviceScaleFactor < MinDeviceScaleFactor || v.DeviceScaleFactor > MaxDeviceScaleFactor {
		return NewError(CodeContractMismatch, StageAdmission, "viewport needs positive width and height and a device scale factor between %g and %g", float64(MinDeviceScaleFactor), float64(MaxDeviceScaleFactor))
	}
	w, h := v.PhysicalSize()
	if w > MaxPhysicalSide || h > MaxPhysicalSide {
		return NewError(CodeOutputLimitExceeded, StageAdmission, "physical canvas %dx%d exceeds %d pixels a side", w, h, MaxPhysicalSide)
	}
	if int64(w)*int64(h) > MaxPhysicalPixels {
		return NewError(CodeOutputLimitExceeded, StageAdmission, "physical canvas %dx%d exceeds %d pixels", w, h, MaxPhysicalPixels)
	}
	return nil
}

// OperationOptions are the permitted parameters of an operation. There is
// deliberately no URL, script or browser flag here.
type OperationOptions struct {
	// Scenes are the named presets component.diagnose runs after the
	// default scene, in this order. "default" may be listed first; it is
	// never run twice. Other operations take no scenes.
	Scenes []string `json:"scenes,omitempty"`
}

// SceneList returns the scenes to run, default first, without duplicates.
func (o OperationOptions) SceneList() []string {
	out := []string{DefaultScene}
	seen := map[string]bool{DefaultScene: true}
	for _, s := range o.Scenes {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// PreviewAccess is the short-lived read authorization for the request's
// artifact. Token is a signed ticket.PreviewAccess; the renderer treats it as
// opaque and never logs it.
type PreviewAccess struct {
	Token     string    `json:"token"`
	ExpiresAt time.Time `json:"expires_at"`
}

// String hides the token so that a request printed by mistake leaks nothing.
func (p PreviewAccess) String() string {
	return fmt.Sprintf("PreviewAccess{token:[REDACTED], expires_at:%s}", p.ExpiresAt.Format(time.RFC3339))
}

// PreviewAccessHeader is the request header that carries the preview access
// token to the preview host. It is set per request, never browser-wide.
const PreviewAccessHeader = "Render-Preview-Access"

// ExecutionRequest is the body of POST /executions.
type ExecutionRequest struct {
	ContractVersion     string           `json:"contract_version"`
	Operation           Operation        `json:"operation"`
	RequestID           string           `json:"request_id"`
	AttemptID           string           `json:"attempt_id"`
	RequestDigest       string           `json:"request_digest"`
	WorkspaceID         string           `json:"workspace_id"`
	TraceID             string           `json:"trace_id"`
	SnapshotRef         string           `json:"snapshot_ref"`
	InputDigest         string           `json:"input_digest"`
	RenderProfileDigest string           `json:"render_profile_digest"`
	Viewport            Viewport         `json:"viewport"`
	OperationOptions    OperationOptions `json:"operation_options"`
	// DeadlineAt and RemainingBudgetMS both bound the attempt; the
	// receiver uses the smaller, converted to a monotonic timer.
	DeadlineAt        time.Time     `json:"deadline_at"`
	RemainingBudgetMS int64         `json:"remaining_budget_ms"`
	AdmissionTicket   string        `json:"admission_ticket"`
	PreviewAccess     PreviewAccess `json:"preview_access"`
}

// semanticRequest is what request_digest covers: the inputs that decide the
// output. Attempt, trace, deadlines and credentials are excluded because they
// change between attempts of the same request or are short-lived.
type semanticRequest struct {
	ContractVersion     string           `json:"contract_version"`
	Operation           Operation        `json:"operation"`
	RequestID           string           `json:"request_id"`
	WorkspaceID         string           `json:"workspace_id"`
	SnapshotRef         string           `json:"snapshot_ref"`
	InputDigest         string           `json:"input_digest"`
	RenderProfileDigest string           `json:"render_profile_digest"`
	Viewport            Viewport         `json:"viewport"`
	OperationOptions    OperationOptions `json:"operation_options"`
}

// ComputeRequestDigest returns the canonical digest of the request's
// semantic fields. The coordinator sets RequestDigest to it; the renderer
// recomputes it and refuses a request whose digest does not match.
func (r *ExecutionRequest) ComputeRequestDigest() (string, error) {
	return digest.JSON(semanticRequest{
		ContractVersion:     r.ContractVersion,
		Operation:           r.Operation,
		RequestID:           r.RequestID,
		WorkspaceID:         r.WorkspaceID,
		SnapshotRef:         r.SnapshotRef,
		InputDigest:         r.InputDigest,
		RenderProfileDigest: r.RenderProfileDigest,
		Viewport:            r.Viewport,
		OperationOptions:    r.OperationOptions,
	})
}

// RenderDigest is the hash of the render profile, viewport, operation and
// options: what, besides the input, decides the output.
func RenderDigest(profileDigest string, op Operation, vp Viewport, opts OperationOptions) (string, error) {
	return digest.JSON(struct {
		Profile   string           `json:"render_profile_digest"`
		Operation Operation        `json:"operation"`
		Viewport  Viewport         `json:"viewport"`
		Options   OperationOptions `json:"operation_options"`
	}{profileDigest, op, vp, opts})
}

// CheckShape validates everything that can be judged from the request alone:
// versions, IDs, digests, canvas and scene limits. Ticket, identity and
// profile checks are the receiver's.
func (r *ExecutionRequest) CheckShape() *Error {
	mismatch := func(format string, args ...any) *Error {
		return NewError(CodeContractMismatch, StageAdmission, format, args...)
	}
	if r.ContractVersion != ContractVersion {
		return mismatch("contract_version %q is not %q", r.ContractVersion, ContractVersion)
	}
	if !r.Operation.Valid() {
		return mismatch("operation %q is not one of page.capture, page.diagnose, component.diagnose", r.Operation)
	}
	for _, f := range []struct{ name, v string }{
		{"request_id", r.RequestID}, {"attempt_id", r.AttemptID}, {"workspace_id", r.WorkspaceID},
		{"snapshot_ref", r.SnapshotRef},
	} {
		if !ValidID(f.v) {
			return mismatch("%s must be 1 to %d characters of letters, digits, '_' and '-'", f.name, MaxIDLength)
		}
	}
	if r.TraceID != "" && !ValidID(r.TraceID) {
		return mismatch("trace_id must be letters, digits, '_' and '-'")
	}
	for _, f := range []struct{ name, v string }{
		{"request_digest", r.RequestDigest}, {"input_digest", r.InputDigest}, {"render_profile_digest", r.RenderProfileDigest},
	} {
		if !digest.Valid(f.v) {
			return mismatch("%s is not a sha256: digest", f.name)
		}
	}
	want, err := r.ComputeRequestDigest()
	if err != nil || want != r.RequestDigest {
		return mismatch("request_digest does not match the request's semantic fields")
	}
	if e := r.Viewport.Check(); e != nil {
		return e
	}
	if r.Operation != OpComponentDiagnose && len(r.OperationOptions.Scenes) > 0 {
		return mismatch("operation_options.scenes is only permitted for component.diagnose")
	}
	for _, s := range r.OperationOptions.Scenes {
		if !ValidID(s) || len(s) > 64 {
			return mismatch("scene names must be 1 to 64 characters of letters, digits, '_' and '-'")
		}
	}
	if n := len(r.OperationOptions.SceneList()); n > MaxScenes {
		return NewError(CodeOutputLimitExceeded, StageAdmission, "%d scenes requested, at most %d including default", n, MaxScenes)
	}
	if r.DeadlineAt.IsZero() || r.RemainingBudgetMS <= 0 {
		return mismatch("deadline_at and a positive remaining_budget_ms are required")
	}
	if r.AdmissionTicket == "" {
		return NewError(CodeInputExpired, StageAdmission, "admission_ticket is required")
	}
	if r.PreviewAccess.Token == "" || r.PreviewAccess.ExpiresAt.IsZero() {
		return NewError(CodeInputExpired, StageAdmission, "preview_access with token and expires_at is required")
	}
	return nil
}

// ValidID reports whether s is a safe opaque identifier: it may appear in
// paths and logs but never reaches the file system.
func ValidID(s string) bool {
	if s == "" || len(s) > MaxIDLength {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// PreviewPath is the path, below the navigation base path, of the preview
// document of a snapshot. The renderer builds the document URL from trusted
// configuration and this path; the request never names a URL.
func PreviewPath(basePath, snapshotRef string) string {
	return strings.TrimSuffix(basePath, "/") + "/snapshots/" + url.PathEscape(snapshotRef)
}
