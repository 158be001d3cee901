package load

import (
	"fmt"
	"html"
	"io"
	"math"
	"slices"
	"strings"
	"time"
)

// WritePlot writes a self-contained HTML page (inline SVG: no script, no file or address to
// fetch) of latency over time: one panel per operation, on a logarithmic latency axis, with
// every sample as a dot (at most maxDots per operation, evenly thinned; failed ones in red at
// their latency) and the per-second p50 and p95 as lines. The time axis, seconds since the
// first sample, is the same in every panel.
func WritePlot(w io.Writer, title string, samples []Sample) error {
	const width, height, left, right, top, bottom = 1100, 220, 70, 20, 28, 30
	const maxDots = 3000
	byOp := map[string][]Sample{}
	var t0, t1 time.Time
	for _, s := range samples {
		byOp[s.Op] = append(byOp[s.Op], s)
		if t0.IsZero() || s.Start.Before(t0) {
			t0 = s.Start
		}
		if end := s.Start.Add(s.Latency); end.After(t1) {
			t1 = end
		}
	}
	ops := make([]string, 0, len(byOp))
	for op := range byOp {
		ops = append(ops, op)
	}
	slices.Sort(ops)
	span := math.Max(t1.Sub(t0).Seconds(), 1)
	var b strings.Builder
	fmt.Fprintf(&b, `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>%s</title>
<style>body{font:14px system-ui,sans-serif;margin:20px;color:#222}h1{font-size:18px}h2{font-size:14px;margin:18px 0 2px}
svg{background:#fafafa;border:1px solid #ddd}.g{stroke:#e3e3e3}.a{fill:#555;font-size:11px}.k{font-size:12px;color:#555}</style></head><body>
<h1>%s</h1><p class="k">dots: samples (red: failed); <span style="color:#1f77b4">━ p50</span> and <span style="color:#ff7f0e">━ p95</span> per second; latency axis logarithmic; x: seconds since the first sample</p>
`, html.EscapeString(title), html.EscapeString(title))
	pw, ph := float64(width-left-right), float64(height-top-bottom)
	for _, op := range ops {
		ss := byOp[op]
		sum := summarize(op, ss, 0)
		lo, hi := math.Inf(1), 0.0
		for _, s := range ss {
			v := float64(s.Latency) / 1e6
			lo, hi = math.Min(lo, v), math.Max(hi, v)
		}
		dlo := math.Pow(10, math.Floor(math.Log10(math.Max(lo, 0.01))))
		dhi := math.Pow(10, math.Ceil(math.Log10(math.Max(hi, dlo*10))))
		x := func(t time.Time) float64 { return left + t.Sub(t0).Seconds()/span*pw }
		y := func(ms float64) float64 {
			ms = math.Min(math.Max(ms, dlo), dhi)
			return top + ph - (math.Log10(ms)-math.Log10(dlo))/(math.Log10(dhi)-math.Log10(dlo))*ph
		}
		errs := sum.Count - sum.OK
		fmt.Fprintf(&b, `<h2>%s</h2><div class="k">%d samples, %d failed; p50 %s, p95 %s, p99 %s</div>
<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d">
`, html.EscapeString(op), sum.Count, errs, fmtMs(sum.P50), fmtMs(sum.P95), fmtMs(sum.P99), width, height, width, height)
		for d := dlo; d <= dhi*1.001; d *= 10 {
			fmt.Fprintf(&b, `<line class="g" x1="%d" x2="%d" y1="%.1f" y2="%.1f"/><text class="a" x="%d" y="%.1f" text-anchor="end">%s</text>
`, left, width-right, y(d), y(d), left-6, y(d)+4, axisMs(d))
		}
		step := niceStep(span)
		for s := 0.0; s <= span+1e-9; s += step {
			xx := left + s/span*pw
			fmt.Fprintf(&b, `<line class="g" x1="%.1f" x2="%.1f" y1="%d" y2="%d"/><text class="a" x="%.1f" y="%d" text-anchor="middle">%gs</text>
`, xx, xx, top, height-bottom, xx, height-bottom+16, s)
		}
		stride := max(1, (len(ss)+maxDots-1)/maxDots)
		b.WriteString(`<g fill-opacity="0.45">`)
		for i, s := range ss {
			if i%stride != 0 && s.OK() {
				continue
			}
			color := "#4a7fb5"
			if !s.OK() {
				color = "#d62728"
			}
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="1.8" fill="%s"/>`, x(s.Start), y(float64(s.Latency)/1e6), color)
		}
		b.WriteString("</g>\n")
		var p50, p95 []string
		for _, bk := range Timeline(ss, t0) {
			if bk.P50 == 0 {
				continue
			}
			xx := left + (float64(bk.Second)+0.5)/span*pw
			p50 = append(p50, fmt.Sprintf("%.1f,%.1f", xx, y(bk.P50)))
			p95 = append(p95, fmt.Sprintf("%.1f,%.1f", xx, y(bk.P95)))
		}
		fmt.Fprintf(&b, `<polyline class="p50" fill="none" stroke="#1f77b4" stroke-width="1.6" points="%s"/>
<polyline class="p95" fill="none" stroke="#ff7f0e" stroke-width="1.6" points="%s"/>
</svg>
`, strings.Join(p50, " "), strings.Join(p95, " "))
	}
	b.WriteString("</body></html>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func axisMs(v float64) string {
	switch {
	case v >= 1000:
		return fmt.Sprintf("%gs", v/1000)
	}
	return fmt.Sprintf("%gms", v)
}

// niceStep is a tick interval giving about 10 ticks over span seconds.
func niceStep(span float64) float64 {
	for _, s := range []float64{1, 2, 5, 10, 15, 30, 60, 120, 300, 600} {
		if span/s <= 12 {
			return s
		}
	}
	return 1200
}
