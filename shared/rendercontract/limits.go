package rendercontract

// Versions a release declares; a mismatch is rejected, never translated.
const (
	// ContractVersion is the control protocol, carried in every request
	// as contract_version.
	ContractVersion = "render-execution.v1"
	// ReadinessProtocol is the preview host protocol the renderer waits on.
	ReadinessProtocol = "render-ready.v1"
	// ResultSchemaVersion versions Receipt and Result.
	ResultSchemaVersion = "render-result.v1"
	// DiagnosisSchemaVersion versions the diagnosis.json artifact.
	DiagnosisSchemaVersion = "render-diagnosis.v1"
	// APIRoot is the path prefix of the renderer's control API.
	APIRoot = "/internal/render/v1"
)

// Limits from the specification. They are constants, not settings: changing
// one is a contract change.
const (
	// MaxPhysicalPixels bounds width × height × DSF² (16 megapixels,
	// decimal).
	MaxPhysicalPixels = 16_000_000
	// MaxPhysicalSide bounds each physical side in pixels.
	MaxPhysicalSide = 8192
	// MaxPNGBytes bounds a capture.
	MaxPNGBytes = 32 << 20
	// MaxDiagnosisBytes bounds diagnosis.json.
	MaxDiagnosisBytes = 1 << 20
	// MaxScenes bounds the component scenes of one request, default
	// included.
	MaxScenes = 16
	// MaxDeviceScaleFactor and MinDeviceScaleFactor bound the DSF; values
	// outside produce no useful slide images.
	MaxDeviceScaleFactor = 4
	MinDeviceScaleFactor = 0.5
	// MaxIDLength bounds request, attempt and workspace IDs.
	MaxIDLength = 128
	// MaxRequestBytes bounds the execution request body.
	MaxRequestBytes = 64 << 10
)

// Limits is the limits block of the capabilities answer.
type Limits struct {
	MaxPhysicalPixels int   `json:"max_physical_pixels"`
	MaxPhysicalSide   int   `json:"max_physical_side"`
	MaxPNGBytes       int64 `json:"max_png_bytes"`
	MaxDiagnosisBytes int64 `json:"max_diagnosis_bytes"`
	MaxScenes         int   `json:"max_scenes"`
	Slots             int   `json:"slots"`
	CleanupGraceMS    int64 `json:"cleanup_grace_ms"`
	ResultTTLSeconds  int64 `json:"result_ttl_seconds"`
}

// ContractLimits returns the constant part of Limits.
func ContractLimits() Limits {
	return Limits{
		MaxPhysicalPixels: MaxPhysicalPixels,
		MaxPhysicalSide:   MaxPhysicalSide,
		MaxPNGBytes:       MaxPNGBytes,
		MaxDiagnosisBytes: MaxDiagnosisBytes,
		MaxScenes:         MaxScenes,
		Slots:             1,
	}
}
