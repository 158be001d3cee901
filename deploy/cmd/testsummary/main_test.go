package main

import (
	"strings"
	"testing"
)

func TestSummaryCountsAndShowsFailuresAndSkips(t *testing.T) {
	in := []string{
		`{"Action":"run","Package":"p","Test":"TestA"}`,
		`{"Action":"output","Package":"p","Test":"TestA","Output":"=== RUN   TestA\n"}`,
		`{"Action":"pass","Package":"p","Test":"TestA"}`,
		`{"Action":"output","Package":"p","Test":"TestB","Output":"    b_test.go:9: got 1, want 2\n"}`,
		`{"Action":"fail","Package":"p","Test":"TestB"}`,
		`{"Action":"output","Package":"p","Test":"TestC","Output":"    c_test.go:3: needs root: a reason\n"}`,
		`{"Action":"output","Package":"p","Test":"TestC","Output":"--- SKIP: TestC (0.00s)\n"}`,
		`{"Action":"skip","Package":"p","Test":"TestC"}`,
		`{"Action":"output","Package":"p","Test":"TestD","Output":"panic: boom\n"}`,
		`{"Action":"output","Package":"p","Output":"FAIL\tp\t0.1s\n"}`,
		`{"Action":"fail","Package":"p"}`,
		`not json: a build error`,
	}
	var out strings.Builder
	s := &summary{out: &out, output: map[key]*strings.Builder{}}
	for _, l := range in {
		s.line([]byte(l))
	}
	if !s.close() {
		t.Fatal("close reported no failure")
	}
	got := out.String()
	for _, want := range []string{"--- FAIL p TestB\n    b_test.go:9: got 1, want 2", "p TestC: needs root: a reason",
		"--- unfinished p TestD\npanic: boom", "FAIL\tp\t0.1s", "not json: a build error", "failed packages (1): p\n", "\n1 passed, 1 failed, 1 skipped\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
	if strings.Contains(got, "=== RUN   TestA") {
		t.Errorf("a passed test's output was printed:\n%s", got)
	}
}
