package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
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

// TestLoadSpreadsOverTheURLs: both generators send requests to every URL of a target.
func TestLoadSpreadsOverTheURLs(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.URL.Path]++
		mu.Unlock()
	}))
	defer srv.Close()
	urls := []string{srv.URL + "/api/v1/workspaces/ws_a", srv.URL + "/api/v1/workspaces/ws_b", srv.URL + "/api/v1/workspaces/ws_c"}
	gens := []generator{&goLoad{connections: 3}}
	if path, err := exec.LookPath("wrk"); err == nil {
		gens = append(gens, wrk{path: path, threads: 1, connections: 2})
	} else {
		t.Log("wrk not installed: only the Go generator is tried")
	}
	for _, g := range gens {
		mu.Lock() // the last generator's final requests may still be served
		clear(seen)
		mu.Unlock()
		r, err := g.run(context.Background(), urls, time.Second)
		if err != nil {
			t.Fatalf("%s: %v", g.name(), err)
		}
		mu.Lock()
		for _, u := range urls {
			if p := strings.TrimPrefix(u, srv.URL); seen[p] == 0 {
				t.Errorf("%s sent nothing to %s (%v, %.0f req/s)", g.name(), p, seen, r.rps)
			}
		}
		mu.Unlock()
	}
}
