package load

import (
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"time"
)

// Summary is one operation's figures over a run. Latency percentiles are exact (nearest rank
// over every successful sample), in milliseconds; failed samples are counted by error class and
// left out of the percentiles, so that fast refusals cannot flatter them.
type Summary struct {
	Op       string         `json:"op"`
	Count    int            `json:"count"`
	OK       int            `json:"ok"`
	Errors   map[string]int `json:"errors,omitempty"`
	P50      float64        `json:"p50_ms"`
	P95      float64        `json:"p95_ms"`
	P99      float64        `json:"p99_ms"`
	Max      float64        `json:"max_ms"`
	Mean     float64        `json:"mean_ms"`
	PerSec   float64        `json:"throughput_per_s"` // successful operations per second of the window
	Window   float64        `json:"window_s"`
	Category string         `json:"category,omitempty"` // interactive or background for render operations
}

// Percentile is the nearest-rank q-quantile (0 < q ≤ 1) of sorted durations; 0 for none.
func Percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(q * float64(len(sorted))))
	rank = min(max(rank, 1), len(sorted))
	return sorted[rank-1]
}

func ms(d time.Duration) float64 { return math.Round(float64(d)/1e3) / 1e3 }

// Summarize computes one Summary per operation, sorted by name. window is the length of the
// measured phase, over which throughput is computed.
func Summarize(samples []Sample, window time.Duration) []Summary {
	byOp := map[string][]Sample{}
	for _, s := range samples {
		byOp[s.Op] = append(byOp[s.Op], s)
	}
	out := make([]Summary, 0, len(byOp))
	for op, ss := range byOp {
		out = append(out, summarize(op, ss, window))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Op < out[j].Op })
	return out
}

func summarize(op string, ss []Sample, window time.Duration) Summary {
	sum := Summary{Op: op, Count: len(ss), Window: math.Round(window.Seconds()*1000) / 1000, Category: Categories[op]}
	lat := make([]time.Duration, 0, len(ss))
	var total time.Duration
	for _, s := range ss {
		if !s.OK() {
			if sum.Errors == nil {
				sum.Errors = map[string]int{}
			}
			sum.Errors[s.Error]++
			continue
		}
		lat = append(lat, s.Latency)
		total += s.Latency
	}
	sum.OK = len(lat)
	if len(lat) > 0 {
		slices.Sort(lat)
		sum.P50, sum.P95, sum.P99 = ms(Percentile(lat, .50)), ms(Percentile(lat, .95)), ms(Percentile(lat, .99))
		sum.Max, sum.Mean = ms(lat[len(lat)-1]), ms(total/time.Duration(len(lat)))
	}
	if window > 0 {
		sum.PerSec = math.Round(float64(sum.OK)/window.Seconds()*100) / 100
	}
	return sum
}

// Bucket is one operation's figures in one second of the run (for the report's timeline).
type Bucket struct {
	Second int     `json:"t"` // seconds since the start of the run
	Op     string  `json:"op"`
	Count  int     `json:"count"`
	Errors int     `json:"errors,omitempty"`
	P50    float64 `json:"p50_ms"`
	P95    float64 `json:"p95_ms"`
}

// Timeline buckets samples by the second (from start) in which they started, per operation.
func Timeline(samples []Sample, start time.Time) []Bucket {
	type key struct {
		sec int
		op  string
	}
	lat := map[key][]time.Duration{}
	errs := map[key]int{}
	count := map[key]int{}
	for _, s := range samples {
		k := key{int(s.Start.Sub(start) / time.Second), s.Op}
		count[k]++
		if s.OK() {
			lat[k] = append(lat[k], s.Latency)
		} else {
			errs[k]++
		}
	}
	out := make([]Bucket, 0, len(count))
	for k, n := range count {
		l := lat[k]
		slices.Sort(l)
		out = append(out, Bucket{Second: k.sec, Op: k.op, Count: n, Errors: errs[k], P50: ms(Percentile(l, .5)), P95: ms(Percentile(l, .95))})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Second != out[j].Second {
			return out[i].Second < out[j].Second
		}
		return out[i].Op < out[j].Op
	})
	return out
}

// WriteTable prints the terminal summary: one row per operation, then its errors by class.
func WriteTable(w io.Writer, sums []Summary) {
	fmt.Fprintf(w, "%-24s %8s %8s %7s %10s %10s %10s %10s %9s\n", "operation", "count", "ok", "errors", "p50", "p95", "p99", "max", "ok/s")
	for _, s := range sums {
		fmt.Fprintf(w, "%-24s %8d %8d %7d %10s %10s %10s %10s %9.1f\n", s.Op, s.Count, s.OK, s.Count-s.OK,
			fmtMs(s.P50), fmtMs(s.P95), fmtMs(s.P99), fmtMs(s.Max), s.PerSec)
		classes := make([]string, 0, len(s.Errors))
		for c := range s.Errors {
			classes = append(classes, c)
		}
		sort.Slice(classes, func(i, j int) bool {
			if s.Errors[classes[i]] != s.Errors[classes[j]] {
				return s.Errors[classes[i]] > s.Errors[classes[j]]
			}
			return classes[i] < classes[j]
		})
		for _, c := range classes {
			fmt.Fprintf(w, "%-24s %8d  %s\n", "", s.Errors[c], c)
		}
	}
}

func fmtMs(v float64) string {
	switch {
	case v == 0:
		return "-"
	case v >= 1000:
		return fmt.Sprintf("%.2fs", v/1000)
	case v >= 100:
		return fmt.Sprintf("%.0fms", v)
	}
	return fmt.Sprintf("%.2fms", v)
}
