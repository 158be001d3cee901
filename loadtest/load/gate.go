package load

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"time"
)

// The release gate (render-execution.md, Limits): at least 200 samples per render operation
// type under a fixed budget and mixed load, and an interactive P95 no more than 20% worse than
// the previous baseline's.

// Baseline is the gate's stored reference: the render operations' figures of one gate run,
// the settings that run used (budget and load) and the machine it ran on.
type Baseline struct {
	Recorded time.Time             `json:"recorded"`
	Commit   string                `json:"commit"`
	Machine  Machine               `json:"machine"` // its load_average is the one at the start of the run
	LoadEnd  string                `json:"load_average_after"`
	Settings map[string]string     `json:"settings"`
	Ops      map[string]BaselineOp `json:"operations"`
}

// BaselineOp is one render operation's figures in a baseline.
type BaselineOp struct {
	Category string  `json:"category"`
	Samples  int     `json:"samples"` // successful samples
	P50      float64 `json:"p50_ms"`
	P95      float64 `json:"p95_ms"`
	P99      float64 `json:"p99_ms"`
}

// GateRules are the gate's thresholds.
type GateRules struct {
	Ops            []string // render operation types that need MinSamples each
	Interactive    string   // the operation whose P95 is held to MaxDegradation
	MinSamples     int
	MaxDegradation float64 // 0.20: a P95 more than 20% above the baseline's fails
	MaxErrorRatio  float64 // failed samples of a render operation, at most this share
}

// DefaultGateRules are the spec's: 200 samples per render operation type, interactive P95
// within +20%. Errors must stay under 1% of a render operation's samples, so that a change
// that makes renders fail fast cannot pass on a better P95.
var DefaultGateRules = GateRules{Ops: []string{OpValidate, OpScreenshot}, Interactive: OpValidate,
	MinSamples: 200, MaxDegradation: 0.20, MaxErrorRatio: 0.01}

// BaselineOf makes a baseline of a gate run.
func BaselineOf(r *Report, rules GateRules) Baseline {
	b := Baseline{Recorded: r.Started, Commit: r.Commit, Machine: r.Machine, LoadEnd: r.LoadAfter, Settings: r.Settings, Ops: map[string]BaselineOp{}}
	for _, op := range rules.Ops {
		s := r.Op(op)
		b.Ops[op] = BaselineOp{Category: Categories[op], Samples: s.OK, P50: s.P50, P95: s.P95, P99: s.P99}
	}
	return b
}

// CheckRun lists what makes a run unfit as a gate run or as a baseline, whatever it is compared
// with: too few samples of a render operation, too many errors.
func CheckRun(r *Report, rules GateRules) []string {
	var bad []string
	for _, op := range rules.Ops {
		s := r.Op(op)
		if s.OK < rules.MinSamples {
			bad = append(bad, fmt.Sprintf("%s: %d successful samples, the gate needs at least %d", op, s.OK, rules.MinSamples))
		}
		if s.Count > 0 && float64(s.Count-s.OK) > rules.MaxErrorRatio*float64(s.Count) {
			bad = append(bad, fmt.Sprintf("%s: %d of %d samples failed (%s), more than %.0f%%", op, s.Count-s.OK, s.Count,
				errorList(s.Errors), rules.MaxErrorRatio*100))
		}
	}
	return bad
}

func errorList(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := ""
	for i, k := range keys {
		if i > 0 {
			out += ", "
		}
		out += fmt.Sprintf("%d× %s", m[k], k)
	}
	return out
}

// Verdict is the gate's answer.
type Verdict struct {
	Pass     bool
	Failures []string // why it failed
	Warnings []string // what makes the comparison weaker without failing it
	Lines    []string // the comparison, one line per render operation
}

// Compare judges a gate run against a baseline.
func Compare(base Baseline, r *Report, rules GateRules) Verdict {
	var v Verdict
	v.Failures = append(v.Failures, CheckRun(r, rules)...)
	keys := map[string]bool{}
	for k := range base.Settings {
		keys[k] = true
	}
	for k := range r.Settings {
		keys[k] = true
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	for _, k := range sorted {
		if b, n := base.Settings[k], r.Settings[k]; b != n {
			v.Failures = append(v.Failures, fmt.Sprintf("setting %s is %q, the baseline's was %q: a different budget or load makes the P95s incomparable (record a new baseline with make gate-baseline if this is meant)", k, n, b))
		}
	}
	if base.Machine.Kind() != r.Machine.Kind() {
		v.Warnings = append(v.Warnings, fmt.Sprintf("the baseline comes from another kind of machine (%s; this one: %s)", base.Machine.Kind(), r.Machine.Kind()))
	}
	for _, op := range rules.Ops {
		b, ok := base.Ops[op]
		cur := r.Op(op)
		if !ok || b.P95 <= 0 {
			if op == rules.Interactive {
				v.Failures = append(v.Failures, fmt.Sprintf("the baseline has no P95 of %s", op))
			}
			continue
		}
		change := cur.P95/b.P95 - 1
		line := fmt.Sprintf("%-18s %-11s P95 %9.1f ms → %9.1f ms (%+.1f%%)  samples %d → %d", op, Categories[op], b.P95, cur.P95, change*100, b.Samples, cur.OK)
		if op == rules.Interactive {
			line += fmt.Sprintf("  limit %+.0f%%", rules.MaxDegradation*100)
			if cur.OK > 0 && change > rules.MaxDegradation {
				v.Failures = append(v.Failures, fmt.Sprintf("interactive P95 (%s) degraded by %.1f%% against the baseline (%.1f ms → %.1f ms), more than %.0f%%",
					op, change*100, b.P95, cur.P95, rules.MaxDegradation*100))
			}
		}
		v.Lines = append(v.Lines, line)
	}
	v.Pass = len(v.Failures) == 0
	return v
}

// ReadBaseline reads a baseline file.
func ReadBaseline(path string) (Baseline, error) {
	var b Baseline
	raw, err := os.ReadFile(path)
	if err != nil {
		return b, err
	}
	if err := json.Unmarshal(raw, &b); err != nil {
		return b, fmt.Errorf("%s: %w", path, err)
	}
	return b, nil
}

// WriteBaseline writes a baseline file.
func WriteBaseline(path string, b Baseline) error {
	raw, err := json.MarshalIndent(b, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(raw, '\n'), 0o644)
}
