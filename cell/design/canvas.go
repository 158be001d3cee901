package design

// Canvas is the fixed render canvas.
type Canvas struct {
	Width             int `json:"width"`
	Height            int `json:"height"`
	DeviceScaleFactor int `json:"device_scale_factor"`
	MaxPhysicalPixels int `json:"max_physical_pixels"`
	MaxSidePixels     int `json:"max_side_pixels"`
}

// RenderCanvas is the canvas pages render on; style page sizes are bounded by it.
var RenderCanvas = Canvas{Width: 1280, Height: 720, DeviceScaleFactor: 2, MaxPhysicalPixels: 16_000_000, MaxSidePixels: 8192}

// MaxPageSide is the largest page side in CSS px: the physical side limit at the device scale.
func MaxPageSide() int { return RenderCanvas.MaxSidePixels / RenderCanvas.DeviceScaleFactor }

// MaxPagePixels is the largest page area in CSS px².
func MaxPagePixels() int {
	return RenderCanvas.MaxPhysicalPixels / (RenderCanvas.DeviceScaleFactor * RenderCanvas.DeviceScaleFactor)
}
