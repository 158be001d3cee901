package main

import (
	"fmt"
	"testing"
)

func TestPlanRebalance(t *testing.T) {
	cells := []cellLoad{{ID: "cell-a"}, {ID: "cell-b"}, {ID: "cell-c", Max: 3}}
	var wss []wsLoad
	for i := range 8 {
		wss = append(wss, wsLoad{ID: fmt.Sprintf("ws_%d", i), Cell: "cell-a", Bytes: 1 << 20})
	}
	wss = append(wss, wsLoad{ID: "ws_big", Cell: "cell-a", Bytes: 100 << 20, Pinned: true})
	wss = append(wss, wsLoad{ID: "ws_moving", Cell: "cell-a", Bytes: 1 << 20, Moving: true})
	plan := planRebalance(cells, wss, 100)
	count := map[string]int{"cell-a": 10}
	for _, p := range plan {
		if p.Workspace == "ws_big" || p.Workspace == "ws_moving" {
			t.Fatalf("moved %s", p.Workspace)
		}
		if p.From != "cell-a" {
			t.Fatalf("move from %s", p.From)
		}
		count[p.From]--
		count[p.To]++
	}
	if count["cell-c"] > 3 {
		t.Fatalf("cell-c over capacity: %v", count)
	}
	if count["cell-b"] == 0 || count["cell-c"] == 0 || count["cell-a"] >= 10 {
		t.Fatalf("no balancing: %v %v", count, plan)
	}
	// Balanced already: nothing to do; the cap on moves holds.
	if p := planRebalance(cells[:2], []wsLoad{{ID: "ws_1", Cell: "cell-a", Bytes: 5}, {ID: "ws_2", Cell: "cell-b", Bytes: 5}}, 10); len(p) != 0 {
		t.Fatalf("balanced: %v", p)
	}
	if p := planRebalance(cells, wss, 2); len(p) != 2 {
		t.Fatalf("max moves: %v", p)
	}
	// Bytes count: one heavy workspace against many light ones moves light ones over, not the heavy one twice.
	heavy := []wsLoad{{ID: "ws_h", Cell: "cell-a", Bytes: 10 << 20}, {ID: "ws_l1", Cell: "cell-b", Bytes: 1}, {ID: "ws_l2", Cell: "cell-b", Bytes: 1}, {ID: "ws_l3", Cell: "cell-b", Bytes: 1}}
	for _, p := range planRebalance(cells[:2], heavy, 10) {
		if p.Workspace == "ws_h" && p.To == "cell-b" {
			t.Fatalf("moved the heavy workspace onto the many: %v", p)
		}
	}
}

func TestPlanDrain(t *testing.T) {
	cells := []cellLoad{{ID: "cell-b"}, {ID: "cell-c", Max: 1}}
	wss := []wsLoad{
		{ID: "ws_1", Cell: "cell-a"}, {ID: "ws_2", Cell: "cell-a"}, {ID: "ws_3", Cell: "cell-a", Pinned: true},
		{ID: "ws_4", Cell: "cell-a", Moving: true}, {ID: "ws_5", Cell: "cell-b"},
	}
	plan, pinned := planDrain("cell-a", cells, wss, map[string]bool{})
	if len(pinned) != 1 || pinned[0] != "ws_3" || len(plan) != 2 {
		t.Fatalf("plan %v pinned %v", plan, pinned)
	}
	to := map[string]int{}
	for _, p := range plan {
		to[p.To]++
	}
	if to["cell-c"] != 1 || to["cell-b"] != 1 {
		t.Fatalf("targets: %v", plan)
	}
	// No room anywhere: the plan says so (empty target).
	plan, _ = planDrain("cell-a", []cellLoad{{ID: "cell-c", Max: 1}}, append(wss, wsLoad{ID: "ws_6", Cell: "cell-c"}), map[string]bool{})
	if len(plan) != 2 || plan[0].To != "" || plan[1].To != "" {
		t.Fatalf("no room: %v", plan)
	}
}
