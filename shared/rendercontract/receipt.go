package rendercontract

import "time"

// AttemptState is the renderer's view of an attempt. The coordinator's
// reserved/dispatched/unknown states happen before or outside the renderer.
type AttemptState string

// Attempt states on the renderer.
const (
	StateAccepted AttemptState = "accepted"
	StateRunning  AttemptState = "running"
	StateCleaning AttemptState = "cleaning"
	StateTerminal AttemptState = "terminal"
)

// Outcome is how a terminal attempt ended.
type Outcome string

// Outcomes. Rejected attempts never started anything.
const (
	OutcomeSucceeded Outcome = "succeeded"
	OutcomeFailed    Outcome = "failed"
	OutcomeCancelled Outcome = "cancelled"
	OutcomeExpired   Outcome = "expired"
	OutcomeRejected  Outcome = "rejected"
)

// ResourceState tells whether the attempt still holds processes or files.
// Only "released" lets a receipt become terminal.
type ResourceState string

// Resource states.
const (
	// ResourceNone: nothing was allocated (a rejected attempt).
	ResourceNone ResourceState = "none"
	// ResourceHeld: the child process group and temp directory exist.
	ResourceHeld ResourceState = "held"
	// ResourceReleasing: the stop sequence runs.
	ResourceReleasing ResourceState = "releasing"
	// ResourceReleased: the process group is proven gone and the temp
	// directory removed.
	ResourceReleased ResourceState = "released"
	// ResourceUnreleased: the renderer could not prove the process group
	// gone; the slot stays occupied until it can.
	ResourceUnreleased ResourceState = "unreleased"
)

// ResultState tells whether a successful result's artifacts are still
// served.
type ResultState string

// Result states.
const (
	ResultAvailable ResultState = "available"
	ResultConsumed  ResultState = "consumed"
	ResultReclaimed ResultState = "reclaimed"
)

// StageTimes are the wall-clock times of the attempt's stages, UTC. Absent
// stages were not reached.
type StageTimes struct {
	AcceptedAt        *time.Time `json:"accepted_at,omitempty"`
	ChildStartedAt    *time.Time `json:"child_started_at,omitempty"`
	BrowserStartedAt  *time.Time `json:"browser_started_at,omitempty"`
	ReadyAt           *time.Time `json:"ready_at,omitempty"`
	WorkFinishedAt    *time.Time `json:"work_finished_at,omitempty"`
	StopRequestedAt   *time.Time `json:"stop_requested_at,omitempty"`
	CleanupStartedAt  *time.Time `json:"cleanup_started_at,omitempty"`
	CleanupFinishedAt *time.Time `json:"cleanup_finished_at,omitempty"`
	TerminalAt        *time.Time `json:"terminal_at,omitempty"`
}

// Receipt is the renderer's stable record of one attempt, returned by POST
// (202) and GET /executions/{attempt_id}.
type Receipt struct {
	SchemaVersion   string       `json:"schema_version"`
	ContractVersion string       `json:"contract_version"`
	RequestID       string       `json:"request_id"`
	AttemptID       string       `json:"attempt_id"`
	WorkerID        string       `json:"worker_id"`
	Epoch           string       `json:"epoch"`
	SlotGeneration  int64        `json:"slot_generation"`
	RequestDigest   string       `json:"request_digest"`
	Operation       Operation    `json:"operation"`
	TraceID         string       `json:"trace_id,omitempty"`
	State           AttemptState `json:"state"`
	// Outcome is set once State is terminal.
	Outcome         Outcome       `json:"outcome,omitempty"`
	ResourceState   ResourceState `json:"resource_state"`
	CancelRequested bool          `json:"cancel_requested"`
	// HardDeadline is the deadline the supervisor enforces: the smaller of
	// deadline_at, the remaining budget and the ticket's stop_by.
	HardDeadline *time.Time `json:"hard_deadline,omitempty"`
	Times        StageTimes `json:"times"`
	Error        *Error     `json:"error,omitempty"`
	// Result is set only for a terminal, succeeded attempt.
	Result *Result `json:"result,omitempty"`
}

// Terminal reports whether the receipt will not change any more except for
// the result state.
func (r *Receipt) Terminal() bool { return r.State == StateTerminal }

// Valid reports whether s is one of the renderer's attempt states.
func (s AttemptState) Valid() bool {
	switch s {
	case StateAccepted, StateRunning, StateCleaning, StateTerminal:
		return true
	}
	return false
}

// Receipt long-poll: a receipt query (GET /executions/{attempt_id}) with both
// query parameters, ?state=<the state the caller last saw>&wait_ms=<n>, is
// answered once the attempt's state differs from the one given (at once if it
// already does, or is terminal), or after n milliseconds, whichever comes
// first; the answer is the receipt as without them. A renderer that predates
// the parameters ignores them and answers at once, so a caller paces itself
// as if it did not wait.
const (
	QueryReceiptState  = "state"
	QueryReceiptWaitMS = "wait_ms"
	// MaxReceiptWaitMS caps wait_ms (1..MaxReceiptWaitMS): a wait holds a
	// connection and ends well inside any caller's request timeout.
	MaxReceiptWaitMS = 1000
)

// Result is the successful terminal result. The coordinator checks every
// digest against what it sent and what the release requires.
type Result struct {
	Operation           Operation `json:"operation"`
	InputDigest         string    `json:"input_digest"`
	RenderProfileDigest string    `json:"render_profile_digest"`
	RenderDigest        string    `json:"render_digest"`
	HostBuild           string    `json:"host_build"`
	ArtifactID          string    `json:"artifact_id"`
	// State and ExpiresAt say until when the artifacts can be read.
	State              ResultState `json:"state"`
	ExpiresAt          time.Time   `json:"expires_at"`
	Artifacts          []Artifact  `json:"artifacts"`
	FinishedAt         time.Time   `json:"finished_at"`
	CleanupCompletedAt time.Time   `json:"cleanup_completed_at"`
}

// ArtifactName is a server-chosen artifact name from a fixed set; no name
// from a request ever reaches the file system.
type ArtifactName string

// Artifact names.
const (
	ArtifactCapture   ArtifactName = "capture.png"
	ArtifactDiagnosis ArtifactName = "diagnosis.json"
)

// Valid reports whether n is in the allowed set.
func (n ArtifactName) Valid() bool { return n == ArtifactCapture || n == ArtifactDiagnosis }

// ContentType of each artifact.
func (n ArtifactName) ContentType() string {
	switch n {
	case ArtifactCapture:
		return "image/png"
	case ArtifactDiagnosis:
		return "application/json"
	}
	return ""
}

// MaxBytes is the contract limit of each artifact.
func (n ArtifactName) MaxBytes() int64 {
	switch n {
	case ArtifactCapture:
		return MaxPNGBytes
	case ArtifactDiagnosis:
		return MaxDiagnosisBytes
	}
	return 0
}

// ArtifactFor is the artifact an operation produces.
func ArtifactFor(op Operation) ArtifactName {
	if op == OpPageCapture {
		return ArtifactCapture
	}
	return ArtifactDiagnosis
}

// Artifact describes one artifact. SHA256 is a digest string
// ("sha256:<hex>") of exactly the bytes the artifact endpoint streams.
type Artifact struct {
	Name        ArtifactName `json:"name"`
	ContentType string       `json:"content_type"`
	Bytes       int64        `json:"bytes"`
	Width       int          `json:"width,omitempty"`
	Height      int          `json:"height,omitempty"`
	SHA256      string       `json:"sha256"`
}

// Artifact response headers besides Content-Type and Content-Length.
const (
	// HeaderArtifactSHA256 carries the artifact's digest string.
	HeaderArtifactSHA256 = "Render-Artifact-SHA256"
)

// SlotState is the slot's state in capabilities.
type SlotState string

// Slot states. Busy is not unreadiness.
const (
	SlotIdle     SlotState = "idle"
	SlotBusy     SlotState = "busy"
	SlotDraining SlotState = "draining"
)

// Slot describes the one activity slot.
type Slot struct {
	State          SlotState `json:"state"`
	AttemptID      string    `json:"attempt_id,omitempty"`
	SlotGeneration int64     `json:"slot_generation"`
}

// Capabilities is the body of GET /capabilities.
type Capabilities struct {
	WorkerID          string           `json:"worker_id"`
	Epoch             string           `json:"epoch"`
	EnvironmentDigest string           `json:"environment_digest"`
	ProtocolVersions  ProtocolVersions `json:"protocol_versions"`
	Operations        []Operation      `json:"operations"`
	Limits            Limits           `json:"limits"`
	Slot              Slot             `json:"slot"`
	Profile           RenderProfile    `json:"profile"`
	StartedAt         time.Time        `json:"started_at"`
	// Host identifies where this epoch runs: a new epoch proves an older one's processes gone
	// only when both ran on the same host (boot) and in the same cgroup (the one a starting
	// renderer empties of an earlier epoch's leftovers). Absent: nothing is proven.
	Host *HostIdentity `json:"host,omitempty"`
}

// HostIdentity is where a renderer epoch runs: the kernel's boot ID
// (/proc/sys/kernel/random/boot_id, new at every boot of every host) and the identity of the
// renderer's cgroup (its cgroup namespace and the path of its group within it).
type HostIdentity struct {
	BootID string `json:"boot_id"`
	Cgroup string `json:"cgroup"`
}

// Proves reports whether an epoch that started on h, having emptied its cgroup of leftovers,
// proves the processes of an earlier epoch that ran on old gone: the same boot of the same
// host and the same cgroup, both known.
func (h *HostIdentity) Proves(old *HostIdentity) bool {
	return h != nil && old != nil && h.BootID != "" && h.Cgroup != "" && h.BootID == old.BootID && h.Cgroup == old.Cgroup
}

// ProtocolVersions a renderer speaks.
type ProtocolVersions struct {
	Contract     string `json:"contract"`
	Readiness    string `json:"readiness"`
	ResultSchema string `json:"result_schema"`
	Diagnosis    string `json:"diagnosis"`
}

// CurrentProtocolVersions are the versions of this build.
func CurrentProtocolVersions() ProtocolVersions {
	return ProtocolVersions{
		Contract:     ContractVersion,
		Readiness:    ReadinessProtocol,
		ResultSchema: ResultSchemaVersion,
		Diagnosis:    DiagnosisSchemaVersion,
	}
}

// CancelRequest is the optional body of PUT …/cancellation.
type CancelRequest struct {
	// CancelVersion is the request's persisted cancel version; the
	// renderer echoes the highest it saw.
	CancelVersion int64  `json:"cancel_version,omitempty"`
	Reason        string `json:"reason,omitempty"`
}

// CancelAnswer is the body of PUT …/cancellation: either the receipt of a
// known attempt or the fact that a mark was stored for a later POST.
type CancelAnswer struct {
	AttemptID     string   `json:"attempt_id"`
	MarkRecorded  bool     `json:"mark_recorded"`
	CancelVersion int64    `json:"cancel_version,omitempty"`
	Receipt       *Receipt `json:"receipt,omitempty"`
}
