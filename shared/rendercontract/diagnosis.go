package rendercontract

// Severity of a finding.
type Severity string

// Severities.
const (
	SeverityError   Severity = "error"
	SeverityWarning Severity = "warning"
	SeverityInfo    Severity = "info"
)

// Finding codes the renderer's layout analysis emits.
const (
	FindingContentFault = "CONTENT_FAULT"
	FindingMountFailed  = "MOUNT_FAILED"
	FindingRuntimeError = "RUNTIME_ERROR"
	FindingSceneFailed  = "SCENE_FAILED"
	FindingTextOverflow = "TEXT_OVERFLOW"
	FindingTextClipped  = "TEXT_CLIPPED"
	FindingOutOfCanvas  = "OUT_OF_CANVAS"
	FindingOverlap      = "ELEMENT_OVERLAP"
	// FindingGraphicOverlap: a graphic (media, SVG, painted box) painted
	// over text (error) or text running over media (warning); evidence is
	// the graphic, the text (related) and their intersection.
	FindingGraphicOverlap = "GRAPHIC_OVERLAP"
	// FindingOutsideContainer: a graphic or text block sticking out of its
	// parent, which does not clip it.
	FindingOutsideContainer = "CONTENT_OUTSIDE_CONTAINER"
	FindingBlankArea        = "LARGE_BLANK_AREA"
	FindingTextTooSmall     = "TEXT_TOO_SMALL"
	FindingEmptyCanvas      = "EMPTY_CANVAS"
	FindingItemsTruncated   = "ITEMS_TRUNCATED"
	// FindingScenesOverLimit: the component declares more scenes than one
	// diagnosis runs (MaxScenes); those beyond were not checked (error).
	FindingScenesOverLimit = "SCENES_OVER_LIMIT"
)

// Diagnosis is the diagnosis.json artifact of page.diagnose and
// component.diagnose. A diagnosis may complete and still hold content
// errors; that does not mean the content validated.
type Diagnosis struct {
	SchemaVersion string        `json:"schema_version"`
	Operation     Operation     `json:"operation"`
	ArtifactID    string        `json:"artifact_id"`
	Viewport      Viewport      `json:"viewport"`
	Scenes        []SceneReport `json:"scenes"`
	// Items are all findings of all scenes, most severe first.
	Items []Finding `json:"items"`
	// Counts are taken before truncation, so a truncated list still
	// tells how many errors exist.
	Counts    FindingCounts `json:"counts"`
	Truncated bool          `json:"truncated"`
}

// FindingCounts counts findings by severity.
type FindingCounts struct {
	Error   int `json:"error"`
	Warning int `json:"warning"`
	Info    int `json:"info"`
}

// SceneReport is what one scene produced.
type SceneReport struct {
	Scene         string         `json:"scene"`
	Completed     bool           `json:"completed"`
	RuntimeErrors []RuntimeError `json:"runtime_errors"`
	ContentFaults []ContentFault `json:"content_faults"`
	Layout        *Layout        `json:"layout,omitempty"`
}

// RuntimeError is an uncaught exception or console error of the content,
// first line only, bounded.
type RuntimeError struct {
	Message   string `json:"message"`
	Truncated bool   `json:"truncated"`
}

// Rect is a box in CSS pixels relative to the canvas.
type Rect struct {
	X      float64 `json:"x"`
	Y      float64 `json:"y"`
	Width  float64 `json:"width"`
	Height float64 `json:"height"`
}

// Layout are the layout facts of one scene.
type Layout struct {
	Canvas     Rect        `json:"canvas"`
	TextBlocks []TextBlock `json:"text_blocks"`
	Groups     []Group     `json:"groups"`
	Relations  []Relation  `json:"relations"`
	BlankAreas []BlankArea `json:"blank_areas"`
	// Coverage is the share of the canvas covered by visible content.
	Coverage  float64 `json:"coverage"`
	Truncated bool    `json:"truncated"`
}

// TextBlock is an element that directly holds visible text.
type TextBlock struct {
	Selector   string  `json:"selector"`
	Rect       Rect    `json:"rect"`
	Text       string  `json:"text"`
	FontSizePx float64 `json:"font_size_px"`
	Lines      int     `json:"lines"`
	Overflow   bool    `json:"overflow"`
	Clipped    bool    `json:"clipped"`
	Truncated  bool    `json:"truncated"`
}

// Group is a container whose visible children form one visual group.
type Group struct {
	Selector  string `json:"selector"`
	Rect      Rect   `json:"rect"`
	Children  int    `json:"children"`
	Direction string `json:"direction"`
}

// Relation is a spatial relation between two elements.
type Relation struct {
	Kind string  `json:"kind"`
	A    string  `json:"a"`
	B    string  `json:"b"`
	Area float64 `json:"area"`
}

// BlankArea is a large empty region of the canvas.
type BlankArea struct {
	Rect     Rect    `json:"rect"`
	Fraction float64 `json:"fraction"`
}

// Finding is one diagnostic item.
type Finding struct {
	Severity Severity `json:"severity"`
	Code     string   `json:"code"`
	Scene    string   `json:"scene"`
	Message  string   `json:"message"`
	Evidence Evidence `json:"evidence"`
	// Truncated marks evidence that was cut to fit the limits.
	Truncated bool `json:"truncated"`
}

// Evidence points at what a finding is about.
type Evidence struct {
	Selector string `json:"selector,omitempty"`
	Rect     *Rect  `json:"rect,omitempty"`
	Text     string `json:"text,omitempty"`
	Related  string `json:"related,omitempty"`
	Value    string `json:"value,omitempty"`
}
