package supervisor

import (
	"os"
	"strings"
	"testing"
)

// cpuOf reads the group's CPU cap and weight as the kernel reports them.
func cpuOf(t *testing.T, cg *Cgroup) (limit, weight string) {
	t.Helper()
	read := func(f [2]string) string {
		b, err := os.ReadFile(f[0])
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	return read(cg.cpuCap(0)), read(cg.cpuWeight(false))
}

// assertCPU fails unless the group's cgroup holds a standby's CPU (cap
// standbyCPUs, lowest weight) or, standbyCPUs == 0, the attempt's (cap
// cpus, default weight).
func assertCPU(t *testing.T, what string, cg *Cgroup, cpus, standbyCPUs float64) {
	t.Helper()
	wantCap, wantWeight := cg.cpuCap(cpus)[1], cg.cpuWeight(false)[1]
	if standbyCPUs > 0 {
		wantCap, wantWeight = cg.cpuCap(standbyCPUs)[1], cg.cpuWeight(true)[1]
	}
	if limit, weight := cpuOf(t, cg); limit != wantCap || weight != wantWeight {
		t.Fatalf("%s: CPU cap %q weight %q, want %q and %q", what, limit, weight, wantCap, wantWeight)
	}
}

// startStandby starts a sleeping group whose attempt gets 1.5 cores as a
// standby under sc.
func startStandby(t *testing.T, sc *StandbyCPU) run {
	t.Helper()
	r := start(t, "sleep 60", func(s *Spec) {
		s.CgroupLimits = CgroupLimits{CPUs: 1.5}
		s.Standby = sc
	})
	if !r.g.cg.hasCPU() {
		t.Skip("no cpu controller in this cgroup hierarchy (v2 mechanics test)")
	}
	return r
}

// TestStandbyCPUIsRaisedWhenAdmitted: a standby's cgroup has the lowest
// weight and the small cap until it is admitted; then the attempt's cap at
// the default weight. A second Admit changes nothing.
func TestStandbyCPUIsRaisedWhenAdmitted(t *testing.T) {
	sc := &StandbyCPU{CPUs: 0.25}
	r := startStandby(t, sc)
	assertCPU(t, "standby", r.g.cg, 1.5, 0.25)
	for i := 0; i < 2; i++ {
		if err := sc.Admit(); err != nil {
			t.Fatal(err)
		}
		assertCPU(t, "admitted", r.g.cg, 1.5, 0)
	}
}

// TestStandbyCPUAdmittedBeforeCreation: a standby admitted before its
// cgroup exists gets the attempt's CPU from the start.
func TestStandbyCPUAdmittedBeforeCreation(t *testing.T) {
	sc := &StandbyCPU{CPUs: 0.25}
	if err := sc.Admit(); err != nil {
		t.Fatal(err)
	}
	r := startStandby(t, sc)
	assertCPU(t, "admitted before creation", r.g.cg, 1.5, 0)
}

// TestStandbyCPUAdmittedWhileCreated: Admit between the cgroup's creation
// (at the standby's CPU) and its hand-over is not lost: the cgroup is
// raised before Start returns.
func TestStandbyCPUAdmittedWhileCreated(t *testing.T) {
	sc := &StandbyCPU{CPUs: 0.25}
	var created *Cgroup
	sc.afterCreate = func() {
		// The cgroup exists but Admit does not know it yet.
		if err := sc.Admit(); err != nil {
			t.Error(err)
		}
		created = sc.cg
	}
	r := startStandby(t, sc)
	if created != nil {
		t.Fatal("the cgroup was handed to Admit before afterCreate ran")
	}
	assertCPU(t, "admitted while created", r.g.cg, 1.5, 0)
}
