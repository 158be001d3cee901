package load

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// Operation names. Render operations carry the spec's category: validations are interactive
// (page.diagnose), screenshots background (page.capture).
const (
	OpWorkspaceGet  = "api.workspace.get"
	OpProjectList   = "api.project.list"
	OpProjectGet    = "api.project.get"
	OpProjectCreate = "api.project.create"
	OpJobSubmit     = "job.submit"
	OpJobPoll       = "job.poll"
	OpJobEndToEnd   = "job.page_create"
	OpValidate      = "render.validate"
	OpScreenshot    = "render.screenshot"
)

// Categories maps render operations to their scheduling category.
var Categories = map[string]string{OpValidate: "interactive", OpScreenshot: "background"}

// Machine describes where a run happened, so that figures are compared only with figures from
// the same kind of machine.
type Machine struct {
	Host      string  `json:"host"`
	CPU       string  `json:"cpu"`
	CPUs      int     `json:"cpus"`
	MemoryGiB float64 `json:"memory_gib"`
	Kernel    string  `json:"kernel"`
	Go        string  `json:"go"`
	LoadAvg   string  `json:"load_average"` // at the start of the run: other work on a shared host
}

// ThisMachine reads the machine's description from /proc.
func ThisMachine() Machine {
	m := Machine{CPUs: runtime.NumCPU(), Go: runtime.Version()}
	m.Host, _ = os.Hostname()
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb float64
		if _, err := fmt.Sscanf(string(b), "MemTotal: %f kB", &kb); err == nil {
			m.MemoryGiB = float64(int(kb/1024/1024*10+0.5)) / 10
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	m.LoadAvg = LoadAverage()
	return m
}

// LoadAverage is the first three fields of /proc/loadavg.
func LoadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// Kind is the machine's description without what varies from run to run (host name, load):
// two runs are comparable when their kinds are equal.
func (m Machine) Kind() string {
	return fmt.Sprintf("%s ×%d, %.0f GiB, %s", m.CPU, m.CPUs, m.MemoryGiB, m.Go)
}

// Commit is the current git commit (with -dirty), or "unknown".
func Commit() string {
	out, err := exec.Command("git", "describe", "--always", "--dirty").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}

// Report is what a run writes as JSON.
type Report struct {
	Scenario  string            `json:"scenario"`
	Commit    string            `json:"commit"`
	Started   time.Time         `json:"started"`
	Duration  float64           `json:"duration_s"` // the measured phase
	Target    string            `json:"target"`     // the router's URL
	Cells     []string          `json:"cells"`
	Machine   Machine           `json:"machine"`
	LoadAfter string            `json:"load_average_after"`
	Settings  map[string]string `json:"settings"` // what the figures depend on: rates, samples, budgets, limits
	Ops       []Summary         `json:"operations"`
	Timeline  []Bucket          `json:"timeline"`
	Notes     []string          `json:"notes,omitempty"`
}

// NewReport summarizes samples of a measured phase that ran from start for window.
func NewReport(scenario string, start time.Time, window time.Duration, samples []Sample) *Report {
	return &Report{Scenario: scenario, Started: start.UTC().Truncate(time.Second), Duration: window.Round(time.Millisecond).Seconds(),
		Settings: map[string]string{}, Ops: Summarize(samples, window), Timeline: Timeline(samples, start)}
}

// Op returns the summary of an operation, or a zero one.
func (r *Report) Op(name string) Summary {
	for _, s := range r.Ops {
		if s.Op == name {
			return s
		}
	}
	return Summary{Op: name}
}

// WriteFiles writes report.json and plot.html into dir and returns their paths.
func (r *Report) WriteFiles(dir string, samples []Sample) (reportPath, plotPath string, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", err
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return "", "", err
	}
	reportPath, plotPath = filepath.Join(dir, "report.json"), filepath.Join(dir, "plot.html")
	if err := os.WriteFile(reportPath, append(b, '\n'), 0o644); err != nil {
		return "", "", err
	}
	f, err := os.Create(plotPath)
	if err != nil {
		return "", "", err
	}
	defer f.Close()
	if err := WritePlot(f, fmt.Sprintf("%s — latency over time (%s)", r.Scenario, r.Started.Format(time.RFC3339)), samples); err != nil {
		return "", "", err
	}
	return reportPath, plotPath, f.Close()
}
