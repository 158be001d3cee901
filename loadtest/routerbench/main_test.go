package main

import (
	"slices"
	"testing"
)

// TestRoundOrderRotates: over as many rounds as targets, every target runs first once, and
// every round runs every target once.
func TestRoundOrderRotates(t *testing.T) {
	const n = 4
	firsts := map[int]bool{}
	for round := range n {
		order := roundOrder(n, round)
		firsts[order[0]] = true
		sorted := slices.Sorted(slices.Values(order))
		if !slices.Equal(sorted, []int{0, 1, 2, 3}) {
			t.Fatalf("round %d runs %v: want each of 0..3 once", round, order)
		}
	}
	if len(firsts) != n {
		t.Errorf("the first targets of %d rounds are %v: want each target first once", n, firsts)
	}
}
