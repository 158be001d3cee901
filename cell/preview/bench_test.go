package preview

import (
	"image/color"
	"net/http"
	"testing"
	"time"

	rc "slidecells/shared/rendercontract"
)

// BenchmarkDocument is one document request with a cached manifest: token verification, the
// document and its CSP (BENCHMARKS.md).
func BenchmarkDocument(b *testing.B) {
	e := newEnv(b)
	m := e.snapshot(simplePage())
	req, _ := http.NewRequest(http.MethodGet, e.docURL(m), nil)
	req.Header.Set(rc.PreviewAccessHeader, e.token(m, nil))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != 200 {
			b.Fatal(err, resp)
		}
		resp.Body.Close()
	}
}

// BenchmarkTimeToReady opens the kit page of TestPageBecomesReady (font, image, chart) in a
// fresh tab and waits until the channel reports it ready (BENCHMARKS.md).
func BenchmarkTimeToReady(b *testing.B) {
	e := newEnv(b)
	m := e.snapshot(snap{
		Source: `import { Slide, Stack } from "@kit/layout";
import { Title, Body } from "@kit/text";
import { Image } from "@kit/media";
import { BarChart } from "@kit/chart";
export default function Page() {
  return <Slide><Stack><Title>Quarterly results</Title><Body>Revenue grew.</Body>
    <Image asset="ast_logo" width={40} height={40} />
    <BarChart data={[{ label: "Q1", value: 3 }, { label: "Q2", value: 5 }]} width={200} height={100} /></Stack></Slide>;
}`,
		Styles: fontStyles,
		Fonts:  []blobSpec{{Data: testFont(b), Type: "font/ttf", Write: true}},
		Assets: []blobSpec{{ID: "ast_logo", Data: pngOf(b, 8, 8, color.RGBA{200, 0, 0, 255}), Type: "image/png", Write: true}},
	})
	tok := e.token(m, nil)
	var total time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		tb := open(b, e.docURL(m), tok, 640, 360)
		tb.wait("ready", settled)
		total += time.Since(start)
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/ready")
}
