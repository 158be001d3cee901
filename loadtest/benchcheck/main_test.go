package main

import (
	"math"
	"testing"
)

func TestPassesJudgesBothOrdersTogether(t *testing.T) {
	for _, c := range []struct {
		ratios []float64
		want   bool
	}{
		{[]float64{1.0}, true},
		{[]float64{0.78}, true},  // at 1/1.30 = 0.769 and above
		{[]float64{0.74}, false}, // one attempt below the tolerance
		// CI on 2026-11-28: 0.74 reference first; the same code HEAD first could read 1.10.
		{[]float64{1.10, 0.74}, true},
		// A real regression shows in both orders.
		{[]float64{0.70, 0.66}, false},
		{[]float64{0.80, 0.70}, false}, // mean 0.748
		{[]float64{math.NaN()}, false},
		{[]float64{0}, false},
		{[]float64{1.2, math.Inf(1)}, false},
		{nil, false},
	} {
		if got := passes(c.ratios, 1.30); got != c.want {
			t.Errorf("passes(%v, 1.30) = %v, want %v", c.ratios, got, c.want)
		}
	}
}
