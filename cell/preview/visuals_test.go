package preview

import (
	"bytes"
	"context"
	"image/color"
	"image/png"
	"testing"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	rc "slidecells/shared/rendercontract"
)

// Images no element event announces — a CSS background (also on a pseudo-element), an SVG
// <image>, a video poster — are awaited: while the image's response is held the mounted page
// reports it pending; once it arrives the page is ready, and a screenshot taken at that moment
// shows the image painted.
func TestVisualResourcesAreAwaited(t *testing.T) {
	const box = `position:absolute;left:0;top:0;width:200px;height:100px`
	cases := []struct {
		name, page, styles string
	}{
		{"css background", `<div class="bg" style="` + box + `"></div>`, `.bg { background-image: url({{asset:0}}); }`},
		{"css background of a pseudo-element", `<div class="bg"></div>`,
			`.bg::before { content: ""; display: block; ` + box + `; background-image: url({{asset:0}}); background-size: 100% 100%; }`},
		{"svg image", `<svg style="` + box + `" width="200" height="100"><image href="{{asset:0}}" x="0" y="0" width="200" height="100" preserveAspectRatio="none"/></svg>`, ``},
		{"video poster", `<video poster="{{asset:0}}" width="200" height="100" style="` + box + `;object-fit:fill"></video>`, ``},
	}
	red := color.RGBA{200, 0, 0, 255}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			asset := blobSpec{ID: "ast_bg", Data: pngOf(t, 8, 8, red), Type: "image/png", Write: true}
			m := e.snapshot(snap{FileType: "html", Source: c.page, Styles: c.styles, Assets: []blobSpec{asset}})
			tb, release := openHeld(t, e.docURL(m), e.token(m, nil), 640, 360, "/blobs/"+m.Assets[0].Hex())
			st := tb.wait("mounted", func(st *rc.ReadyState) bool { return st.Init != rc.InitPending && st.Mount != rc.MountPending })
			if st.Init != rc.InitOK || st.Mount != rc.MountMounted {
				t.Fatalf("state: %+v", st)
			}
			if st.Resources.Images != (rc.ResourceCounts{Pending: 1}) || st.Resources.Pending() != 1 {
				t.Fatalf("the held image is not awaited: %+v", st.Resources)
			}
			release()
			st = tb.wait("ready", settled)
			if st.Resources.Images != (rc.ResourceCounts{Loaded: 1}) || len(st.Resources.Failures) != 0 || len(st.ContentFaults) != 0 {
				t.Fatalf("after the image arrived: %+v faults %+v", st.Resources, st.ContentFaults)
			}
			shot := screenshot(t, tb)
			if got := shot(100, 50); !near(got, red) {
				t.Fatalf("pixel (100,50) of the capture is %v, want the image's %v", got, red)
			}
			if got := shot(400, 200); !near(got, color.RGBA{255, 255, 255, 255}) {
				t.Fatalf("pixel (400,200) outside the image is %v, want white", got)
			}
		})
	}
}

// A CSS image that fails is reported by its asset ID and the page settles: it is not awaited
// forever.
func TestFailedVisualResourceIsReported(t *testing.T) {
	e := newEnv(t)
	m := e.snapshot(snap{FileType: "html",
		Source: `<div class="bg" style="width:200px;height:100px"></div><svg width="10" height="10"><image href="{{asset:1}}" width="10" height="10"/></svg>`,
		Styles: `.bg { background-image: url({{asset:0}}), linear-gradient(#000, #fff); }`,
		Assets: []blobSpec{
			{ID: "ast_gone", Data: pngOf(t, 8, 8, color.RGBA{0, 0, 200, 255}), Type: "image/png", Write: false},
			{ID: "ast_here", Data: pngOf(t, 8, 8, color.RGBA{0, 200, 0, 255}), Type: "image/png", Write: true},
		}})
	tb := open(t, e.docURL(m), e.token(m, nil), 640, 360)
	st := tb.wait("settled", settled)
	r := st.Resources
	if st.Init != rc.InitOK || r.Images != (rc.ResourceCounts{Loaded: 1, Failed: 1}) || len(r.Failures) != 1 ||
		r.Failures[0] != (rc.ResourceFailure{Kind: "image", Ref: "ast_gone", Permanent: true}) {
		t.Fatalf("state: %+v", st)
	}
}

// screenshot captures the tab's viewport as the renderer does (PNG) and returns a pixel reader.
func screenshot(t *testing.T, tb *tab) func(x, y int) color.RGBA {
	t.Helper()
	var buf []byte
	err := chromedp.Run(tb.ctx, chromedp.ActionFunc(func(ctx context.Context) error {
		var err error
		buf, err = page.CaptureScreenshot().WithFormat(page.CaptureScreenshotFormatPng).Do(ctx)
		return err
	}))
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(buf))
	if err != nil {
		t.Fatal(err)
	}
	return func(x, y int) color.RGBA {
		r, g, b, a := img.At(x, y).RGBA()
		return color.RGBA{uint8(r >> 8), uint8(g >> 8), uint8(b >> 8), uint8(a >> 8)}
	}
}

func near(a, b color.RGBA) bool {
	d := func(x, y uint8) int {
		if x > y {
			return int(x - y)
		}
		return int(y - x)
	}
	return d(a.R, b.R) <= 8 && d(a.G, b.G) <= 8 && d(a.B, b.B) <= 8
}
