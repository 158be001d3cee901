package rendercontract

import "fmt"

// Code is a render error code from the specification. Callers branch on the
// code and category, never on the message or the HTTP status.
type Code string

// Error codes.
const (
	CodeQueueFull            Code = "RENDER_QUEUE_FULL"
	CodeWorkerBusy           Code = "RENDER_WORKER_BUSY"
	CodeServiceUnavailable   Code = "RENDER_SERVICE_UNAVAILABLE"
	CodeContractMismatch     Code = "RENDER_CONTRACT_MISMATCH"
	CodeProfileMismatch      Code = "RENDER_PROFILE_MISMATCH"
	CodeInputExpired         Code = "RENDER_INPUT_EXPIRED"
	CodeInputNotReproducible Code = "RENDER_INPUT_NOT_REPRODUCIBLE"
	CodeContentError         Code = "RENDER_CONTENT_ERROR"
	CodeAssetNotReady        Code = "RENDER_ASSET_NOT_READY"
	CodeBrowserLost          Code = "RENDER_BROWSER_LOST"
	CodeDeadlineExceeded     Code = "RENDER_DEADLINE_EXCEEDED"
	CodeResultLost           Code = "RENDER_RESULT_LOST"
	CodeOutputLimitExceeded  Code = "RENDER_OUTPUT_LIMIT_EXCEEDED"
	CodeCancelled            Code = "RENDER_CANCELLED"
	CodeInternal             Code = "RENDER_INTERNAL_ERROR"
	// CodeUnauthenticated is not in the specification's table: a missing
	// or wrong service credential on the control API. It has its own code
	// so that a credential problem is never read as an expired input.
	CodeUnauthenticated Code = "RENDER_SERVICE_UNAUTHENTICATED"
)

// Category groups codes by who must act.
type Category string

// Error categories.
const (
	CategoryCapacity       Category = "capacity"
	CategoryInfrastructure Category = "infrastructure"
	CategoryConfiguration  Category = "configuration"
	CategoryInput          Category = "input"
	CategoryContent        Category = "content"
	CategoryResource       Category = "resource"
	CategoryTimeout        Category = "timeout"
	CategoryCancellation   Category = "cancellation"
	CategoryInternal       Category = "internal"
)

// Stage names where in an attempt an error arose.
type Stage string

// Stages of an attempt, in order.
const (
	StageAdmission  Stage = "admission"
	StageLaunch     Stage = "launch"
	StageNavigation Stage = "navigation"
	StageReadiness  Stage = "readiness"
	StageCapture    Stage = "capture"
	StageDiagnose   Stage = "diagnose"
	StageResult     Stage = "result"
	StageCleanup    Stage = "cleanup"
	StageRetrieval  Stage = "retrieval"
)

type codeInfo struct {
	category  Category
	retryable bool
}

// codes is the one table of category and default retryability per code.
// Retryable is a hint for the coordinator, which still decides by category,
// remaining time and budget.
var codes = map[Code]codeInfo{
	CodeQueueFull:            {CategoryCapacity, true},
	CodeWorkerBusy:           {CategoryCapacity, true},
	CodeServiceUnavailable:   {CategoryInfrastructure, true},
	CodeContractMismatch:     {CategoryConfiguration, false},
	CodeProfileMismatch:      {CategoryConfiguration, false},
	CodeInputExpired:         {CategoryInput, false},
	CodeInputNotReproducible: {CategoryInput, false},
	CodeContentError:         {CategoryContent, false},
	CodeAssetNotReady:        {CategoryResource, true},
	CodeBrowserLost:          {CategoryInfrastructure, true},
	CodeDeadlineExceeded:     {CategoryTimeout, false},
	CodeResultLost:           {CategoryInfrastructure, true},
	CodeOutputLimitExceeded:  {CategoryResource, false},
	CodeCancelled:            {CategoryCancellation, false},
	CodeInternal:             {CategoryInternal, true},
	CodeUnauthenticated:      {CategoryConfiguration, false},
}

// Known reports whether c is a code of the specification.
func (c Code) Known() bool { _, ok := codes[c]; return ok }

// Category returns the code's category; unknown codes are internal.
func (c Code) Category() Category {
	if info, ok := codes[c]; ok {
		return info.category
	}
	return CategoryInternal
}

// Retryable returns the code's default retry hint.
func (c Code) Retryable() bool { return codes[c].retryable }

// Error is the error body of the renderer API and the error summary inside
// receipts. Message is redacted and displayable; raw browser exception
// chains, URLs with credentials and stacks never go into it.
type Error struct {
	Code      Code     `json:"code"`
	Category  Category `json:"category"`
	Stage     Stage    `json:"stage"`
	Retryable bool     `json:"retryable"`
	Message   string   `json:"message"`
	TraceID   string   `json:"trace_id,omitempty"`
	// Resources carries the resource facts of RENDER_ASSET_NOT_READY.
	Resources *ResourceSummary `json:"resources,omitempty"`
	// Situation refines the HTTP status of the answer (see HTTPStatus);
	// it never travels.
	Situation Situation `json:"-"`
}

// In returns a copy of the error answered in situation s.
func (e *Error) In(s Situation) *Error {
	c := *e
	c.Situation = s
	return &c
}

// NewError builds an Error with the code's category and retry hint.
func NewError(code Code, stage Stage, format string, args ...any) *Error {
	return &Error{
		Code:      code,
		Category:  code.Category(),
		Stage:     stage,
		Retryable: code.Retryable(),
		Message:   fmt.Sprintf(format, args...),
	}
}

// Error implements error.
func (e *Error) Error() string {
	return fmt.Sprintf("%s (%s, %s): %s", e.Code, e.Category, e.Stage, e.Message)
}

// WithTrace returns a copy carrying traceID.
func (e *Error) WithTrace(traceID string) *Error {
	c := *e
	c.TraceID = traceID
	return &c
}
