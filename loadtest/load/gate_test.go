package load

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// gateRun is a gate run whose validations have the given P95 (and screenshots 2 s), with n
// successful samples of each and errs failed validations.
func gateRun(p95 float64, n, errs int) *Report {
	r := &Report{Scenario: "gate", Started: time.Unix(1_900_000_000, 0), Machine: Machine{CPU: "AMD EPYC", CPUs: 2, MemoryGiB: 23, Go: "go1.26.8", Host: "a"},
		Settings: map[string]string{"cells": "2", "samples_per_render_op": "200"}}
	v := Summary{Op: OpValidate, Count: n + errs, OK: n, P50: p95 / 2, P95: p95, P99: p95 * 1.2, Category: "interactive"}
	if errs > 0 {
		v.Errors = map[string]int{"200 unavailable RENDER_QUEUE_FULL": errs}
	}
	r.Ops = []Summary{v, {Op: OpScreenshot, Count: n, OK: n, P50: 1500, P95: 2000, P99: 2500, Category: "background"}}
	return r
}

func TestGate(t *testing.T) {
	rules := DefaultGateRules
	base := BaselineOf(gateRun(1000, 200, 0), rules)
	if base.Ops[OpValidate].P95 != 1000 || base.Ops[OpValidate].Samples != 200 || base.Ops[OpScreenshot].Category != "background" {
		t.Fatalf("baseline %+v", base)
	}
	for _, c := range []struct {
		name   string
		run    *Report
		pass   bool
		reason string
	}{
		{"same", gateRun(1000, 200, 0), true, ""},
		{"better", gateRun(700, 250, 0), true, ""},
		{"19.9% worse", gateRun(1199, 200, 0), true, ""},
		{"exactly 20% worse", gateRun(1200, 200, 0), true, ""},
		{"21% worse", gateRun(1210, 200, 0), false, "degraded by 21.0%"},
		{"too few samples", gateRun(900, 199, 0), false, "199 successful samples, the gate needs at least 200"},
		{"too many errors", gateRun(900, 200, 3), false, "3 of 203 samples failed"},
		{"errors within 1%", gateRun(900, 200, 2), true, ""},
	} {
		v := Compare(base, c.run, rules)
		if v.Pass != c.pass {
			t.Errorf("%s: pass=%v, want %v (failures %v)", c.name, v.Pass, c.pass, v.Failures)
		}
		if c.reason != "" && !strings.Contains(strings.Join(v.Failures, "\n"), c.reason) {
			t.Errorf("%s: failures %v lack %q", c.name, v.Failures, c.reason)
		}
		if len(v.Lines) != 2 {
			t.Errorf("%s: lines %v", c.name, v.Lines)
		}
	}
	// A background P95 far worse does not fail the gate: the spec holds only the interactive one.
	slow := gateRun(1000, 200, 0)
	slow.Ops[1].P95 = 9000
	if v := Compare(base, slow, rules); !v.Pass {
		t.Errorf("background P95 failed the gate: %v", v.Failures)
	}
}

func TestGateRefusesDifferentSettingsAndWarnsAboutAnotherMachine(t *testing.T) {
	rules := DefaultGateRules
	base := BaselineOf(gateRun(1000, 200, 0), rules)
	r := gateRun(1000, 200, 0)
	r.Settings["cells"] = "3"
	v := Compare(base, r, rules)
	if v.Pass || !strings.Contains(strings.Join(v.Failures, "\n"), `setting cells is "3", the baseline's was "2"`) {
		t.Errorf("other settings: %+v", v)
	}
	r = gateRun(1000, 200, 0)
	r.Settings["api_rate_per_s"] = "40" // a setting the baseline did not have
	if v := Compare(base, r, rules); v.Pass {
		t.Error("a setting missing from the baseline passed")
	}
	r = gateRun(1000, 200, 0)
	r.Machine.Host, r.Machine.LoadAvg = "b", "9.1 8 7" // same kind of machine
	if v := Compare(base, r, rules); !v.Pass || len(v.Warnings) != 0 {
		t.Errorf("same kind of machine: %+v", v)
	}
	r.Machine.CPUs = 8
	if v := Compare(base, r, rules); !v.Pass || len(v.Warnings) != 1 {
		t.Errorf("another kind of machine should warn, not fail: %+v", v)
	}
	if v := Compare(Baseline{}, gateRun(1000, 200, 0), rules); v.Pass {
		t.Error("an empty baseline passed")
	}
}

func TestBaselineFileRoundTrip(t *testing.T) {
	p := filepath.Join(t.TempDir(), "baseline.json")
	b := BaselineOf(gateRun(1234.5, 210, 0), DefaultGateRules)
	b.Commit = "abc123"
	if err := WriteBaseline(p, b); err != nil {
		t.Fatal(err)
	}
	back, err := ReadBaseline(p)
	if err != nil {
		t.Fatal(err)
	}
	if back.Commit != "abc123" || back.Ops[OpValidate].P95 != 1234.5 || back.Machine.CPUs != 2 || back.Settings["cells"] != "2" {
		t.Errorf("read back %+v", back)
	}
	if _, err := ReadBaseline(filepath.Join(t.TempDir(), "none.json")); err == nil {
		t.Error("a missing baseline read without error")
	}
}
