// Command testsummary reads `go test -json` on its standard input and writes what a person
// reads: each package's ok/FAIL line, the whole output of every failed test (and of a failed
// package's tests that never finished, as after a panic or a timeout), the skipped tests with
// their reasons, and a closing line "N passed, N failed, N skipped". It exits 1 when a test or
// a package failed. `make test` pipes the tests through it, so every run says how many tests
// were skipped and why.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
}

type key struct{ pkg, test string }

type summary struct {
	out                  io.Writer
	output               map[key]*strings.Builder // a running test's output, until it ends
	passed, failed, skip int
	skipped              []string
	failedPkgs           []string
}

func main() {
	s := &summary{out: os.Stdout, output: map[key]*strings.Builder{}}
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		s.line(sc.Bytes())
	}
	if err := sc.Err(); err != nil {
		fmt.Fprintln(os.Stderr, "testsummary:", err)
		os.Exit(1)
	}
	if s.close() {
		os.Exit(1)
	}
}

func (s *summary) line(b []byte) {
	var e event
	if err := json.Unmarshal(b, &e); err != nil || e.Action == "" {
		fmt.Fprintln(s.out, string(b)) // not an event: go test's own words (a build failure)
		return
	}
	k := key{e.Package, e.Test}
	switch {
	case e.Action == "output" && e.Test == "":
		// Package-level lines: ok/FAIL/PASS, build output, a panic outside a test.
		if t := strings.TrimSpace(e.Output); t != "PASS" && t != "" && !strings.HasPrefix(t, "=== ") {
			fmt.Fprint(s.out, e.Output)
		}
	case e.Action == "output":
		b := s.output[k]
		if b == nil {
			b = &strings.Builder{}
			s.output[k] = b
		}
		b.WriteString(e.Output)
	case e.Action == "build-output":
		fmt.Fprint(s.out, e.Output)
	case e.Test != "" && (e.Action == "pass" || e.Action == "fail" || e.Action == "skip"):
		s.end(k, e.Action)
	case e.Test == "" && e.Action == "fail":
		s.failedPkgs = append(s.failedPkgs, e.Package)
		for k2, b := range s.output { // tests that never ended: a panic or a timeout
			if k2.pkg == e.Package {
				fmt.Fprintf(s.out, "--- unfinished %s %s\n%s", k2.pkg, k2.test, b.String())
				delete(s.output, k2)
			}
		}
	}
}

func (s *summary) end(k key, action string) {
	out := ""
	if b := s.output[k]; b != nil {
		out = b.String()
	}
	delete(s.output, k)
	switch action {
	case "pass":
		s.passed++
	case "fail":
		s.failed++
		fmt.Fprintf(s.out, "--- FAIL %s %s\n%s", k.pkg, k.test, out)
	case "skip":
		s.skip++
		s.skipped = append(s.skipped, fmt.Sprintf("%s %s: %s", k.pkg, k.test, reason(out)))
	}
}

// reason is the last line a skipped test logged (t.Skip's message), without the file prefix.
func reason(out string) string {
	var last string
	for _, l := range strings.Split(out, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "=== ") || strings.HasPrefix(l, "--- SKIP") {
			continue
		}
		last = l
	}
	if i := strings.Index(last, ".go:"); i >= 0 {
		if j := strings.Index(last[i:], ": "); j >= 0 {
			last = last[i+j+2:]
		}
	}
	return last
}

// close prints the skipped tests and the closing line, and reports whether anything failed.
func (s *summary) close() bool {
	sort.Strings(s.skipped)
	if len(s.skipped) > 0 {
		fmt.Fprintf(s.out, "skipped tests (%d):\n", len(s.skipped))
		for _, l := range s.skipped {
			fmt.Fprintln(s.out, "  "+l)
		}
	}
	if len(s.failedPkgs) > 0 { // a package that did not build fails with no test failed
		sort.Strings(s.failedPkgs)
		fmt.Fprintf(s.out, "failed packages (%d): %s\n", len(s.failedPkgs), strings.Join(s.failedPkgs, " "))
	}
	fmt.Fprintf(s.out, "%d passed, %d failed, %d skipped\n", s.passed, s.failed, s.skip)
	return s.failed > 0 || len(s.failedPkgs) > 0
}
