package monitoring

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/yaml"

	"slidecells/cell/api"
	"slidecells/renderer"
	"slidecells/router"
)

// exported is every metric family the router, a cell and a renderer can export.
func exported() []string {
	var out []string
	for _, names := range [][]string{router.MetricNames(), api.MetricNames(), renderer.MetricNames()} {
		out = append(out, names...)
	}
	return out
}

// queries reads every PromQL expression of rules.yml and the dashboards.
func queries(t *testing.T) (qs []Query, recorded []string) {
	t.Helper()
	f, err := ReadRules("rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	qs, recorded = RuleQueries("rules.yml", f)
	paths, err := filepath.Glob("dashboards/*.json")
	if err != nil {
		t.Fatal(err)
	}
	var titles []string
	// Grafana lists a dashboard by its title, which CELLS.md ("Monitoring") names.
	names := map[string]string{"cell.json": "Slidecells / Cell", "fleet.json": "Slidecells / Fleet", "renderers.json": "Slidecells / Renderers"}
	for _, p := range paths {
		title, dq, err := DashboardQueries(p)
		if err != nil {
			t.Fatal(err)
		}
		if want := names[filepath.Base(p)]; title != want {
			t.Errorf("%s is titled %q, want %q", p, title, want)
		}
		if len(dq) == 0 {
			t.Errorf("%s has no query", p)
		}
		titles = append(titles, filepath.Base(p))
		qs = append(qs, dq...)
	}
	if want := []string{"cell.json", "fleet.json", "renderers.json"}; !reflect.DeepEqual(titles, want) {
		t.Errorf("dashboards %v, want %v", titles, want)
	}
	return qs, recorded
}

// Every metric a panel or a rule names is exported by a binary: a renamed or removed metric
// fails here, not on a dashboard.
func TestQueriesNameExportedMetrics(t *testing.T) {
	qs, recorded := queries(t)
	if len(qs) < 40 {
		t.Fatalf("only %d queries read", len(qs))
	}
	for _, f := range Check(qs, exported(), recorded) {
		t.Error(f)
	}
}

// The check fails when any metric a dashboard or rule names stops being exported: each is
// removed from the exported list in turn.
func TestCheckCatchesEveryRemovedMetric(t *testing.T) {
	qs, recorded := queries(t)
	all := exported()
	used := map[string]bool{}
	for _, q := range qs {
		names, _ := MetricNames(q.Expr)
		for _, n := range names {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				if base, ok := strings.CutSuffix(n, s); ok && slices.Contains(all, base) {
					n = base
				}
			}
			if slices.Contains(all, n) {
				used[n] = true
			}
		}
	}
	for _, must := range []string{"router_cell_breaker_state", "cell_render_workers", "renderer_attempts_total", "cell_jobs_oldest_pending_seconds"} {
		if !used[must] {
			t.Errorf("nothing names %s", must)
		}
	}
	for n := range used {
		less := slices.DeleteFunc(slices.Clone(all), func(s string) bool { return s == n })
		findings := Check(qs, less, recorded)
		if len(findings) == 0 {
			t.Errorf("without %s the check passes", n)
			continue
		}
		for _, f := range findings {
			if !strings.Contains(f, n) {
				t.Errorf("without %s: unrelated finding %s", n, f)
			}
		}
	}
}

func TestMetricNames(t *testing.T) {
	for expr, want := range map[string][]string{
		`sum by (cell, le) (rate(router_proxy_duration_seconds_bucket{cell=~"$cell"}[$__rate_interval]))`: {"router_proxy_duration_seconds_bucket"},
		`histogram_quantile(0.99, sum without (instance) (rate(a_bucket[5m]))) > 2.5e-1`:                  {"a_bucket"},
		`a / on (cell) group_left (state) b offset 5m and c unless d or bool e`:                           {"a", "b", "c", "d", "e"},
		`label_replace(x{l="a b(c)"}, "dst", "$1", "src", "(.*)") @ start()`:                              {"x"},
		`{__name__="cell:router_requests:rate5m", cell='a'} # a comment naming nothing`:                   {"cell:router_requests:rate5m"},
		`max_over_time(g[1h:5m]) * on() group_right count(h) by (x)`:                                      {"g", "h"},
		`topk(5, sum(rate(m_total[${__range}])) by (operation))`:                                          {"m_total"},
	} {
		got, err := MetricNames(expr)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("MetricNames(%s) = %v, %v; want %v", expr, got, err, want)
		}
	}
	for _, bad := range []string{`a{b="c}`, `rate(a[5m)`, `{__name__=~"cell_.*"}`, `a{b}`} {
		if got, err := MetricNames(bad); err == nil {
			t.Errorf("MetricNames(%s) = %v, want an error", bad, got)
		}
	}
}

// promtool is Debian's prometheus package's: CI installs it (.ci/run); elsewhere its absence
// skips, with CI set it fails.
func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("promtool not found (Debian package prometheus); CI must install it")
		}
		t.Skip("promtool not found (apt-get install prometheus)")
	}
	return p
}

// The rules pass promtool's checks and their unit tests (rules_test.yml): each alert fires on
// one series and stays quiet on another.
func TestPromtoolRules(t *testing.T) {
	bin := promtool(t)
	for _, args := range [][]string{{"check", "rules", "rules.yml"}, {"test", "rules", "rules_test.yml"}} {
		out, err := exec.Command(bin, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// A promtool unit test that expects the wrong alert fails: the test above can fail.
func TestPromtoolCatchesAWrongExpectation(t *testing.T) {
	bin := promtool(t)
	b, err := os.ReadFile("rules_test.yml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	wrong := strings.Replace(string(b), "exp_labels: {severity: critical, cell: bad}", "exp_labels: {severity: critical, cell: good}", 1)
	rules, _ := os.ReadFile("rules.yml")
	if err := os.WriteFile(filepath.Join(dir, "rules.yml"), rules, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "rules_test.yml"), []byte(wrong), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "test", "rules", "rules_test.yml")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err == nil {
		t.Fatalf("promtool accepted a wrong expectation:\n%s", out)
	}
}

// Every alert has a severity, a summary, a runbook section in CELLS.md and a promtool test
// case that expects it to fire.
func TestAlertsAreDocumentedAndTested(t *testing.T) {
	f, err := ReadRules("rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	tests, err := os.ReadFile("rules_test.yml")
	if err != nil {
		t.Fatal(err)
	}
	cells, err := os.ReadFile("../../CELLS.md")
	if err != nil {
		t.Fatal(err)
	}
	alerts := 0
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			alerts++
			if s := r.Labels["severity"]; s != "critical" && s != "warning" {
				t.Errorf("%s: severity %q", r.Alert, s)
			}
			if r.Annotations["summary"] == "" {
				t.Errorf("%s: no summary", r.Alert)
			}
			anchor := strings.ToLower(r.Alert)
			if r.Annotations["runbook_url"] != "CELLS.md#"+anchor {
				t.Errorf("%s: runbook_url %q", r.Alert, r.Annotations["runbook_url"])
			}
			if !strings.Contains(string(cells), "\n#### "+r.Alert+"\n") {
				t.Errorf("%s: no section \"#### %s\" in CELLS.md", r.Alert, r.Alert)
			}
			if !strings.Contains(string(tests), "alertname: "+r.Alert+"\n        exp_alerts:\n          - exp_labels") {
				t.Errorf("%s: no promtool test expects it to fire", r.Alert)
			}
		}
	}
	if alerts < 15 {
		t.Errorf("%d alerts", alerts)
	}
}

// The Kubernetes PrometheusRule carries rules.yml's groups unchanged.
func TestPrometheusRuleMatches(t *testing.T) {
	f, err := ReadRules("rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(prometheusRule)
	if err != nil {
		t.Fatal(err)
	}
	j, err := yaml.ToJSON(b)
	if err != nil {
		t.Fatal(err)
	}
	var pr struct {
		APIVersion string   `json:"apiVersion"`
		Kind       string   `json:"kind"`
		Spec       RuleFile `json:"spec"`
	}
	if err := json.Unmarshal(j, &pr); err != nil {
		t.Fatal(err)
	}
	if pr.APIVersion != "monitoring.coreos.com/v1" || pr.Kind != "PrometheusRule" {
		t.Fatalf("%s is %s %s", prometheusRule, pr.APIVersion, pr.Kind)
	}
	if !reflect.DeepEqual(pr.Spec, f) {
		t.Fatalf("%s differs from rules.yml: regenerate it (see its header)", prometheusRule)
	}
}

const prometheusRule = "../k8s/base/router/prometheusrule.yaml"
