package monitoring

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/util/yaml"
)

// RuleFile is a Prometheus rule file (the fields this package reads and checks).
type RuleFile struct {
	Groups []RuleGroup `json:"groups"`
}

// RuleGroup is one group of a rule file or of a PrometheusRule's spec.
type RuleGroup struct {
	Name     string `json:"name"`
	Interval string `json:"interval,omitempty"`
	Rules    []Rule `json:"rules"`
}

// Rule is a recording rule (Record) or an alert (Alert).
type Rule struct {
	Record      string            `json:"record,omitempty"`
	Alert       string            `json:"alert,omitempty"`
	Expr        string            `json:"expr"`
	For         string            `json:"for,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// ReadRules reads a rule file.
func ReadRules(path string) (RuleFile, error) {
	var f RuleFile
	b, err := os.ReadFile(path)
	if err != nil {
		return f, err
	}
	j, err := yaml.ToJSON(b)
	if err != nil {
		return f, fmt.Errorf("%s: %w", path, err)
	}
	d := json.NewDecoder(strings.NewReader(string(j)))
	d.DisallowUnknownFields()
	if err := d.Decode(&f); err != nil {
		return f, fmt.Errorf("%s: %w", path, err)
	}
	return f, nil
}

// Query is one PromQL expression and where it was found.
type Query struct {
	Where string
	Expr  string
}

// RuleQueries lists the expressions of a rule file, and the names its recording rules define.
func RuleQueries(path string, f RuleFile) (qs []Query, recorded []string) {
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			name := r.Alert
			if r.Record != "" {
				name = r.Record
				recorded = append(recorded, r.Record)
			}
			qs = append(qs, Query{Where: fmt.Sprintf("%s: group %s: %s", filepath.Base(path), g.Name, name), Expr: r.Expr})
		}
	}
	return qs, recorded
}

// panel is what a dashboard panel holds that names metrics: its targets, and the panels of a
// collapsed row.
type panel struct {
	Title   string   `json:"title"`
	Targets []target `json:"targets"`
	Panels  []panel  `json:"panels"`
}

type target struct {
	RefID string `json:"refId"`
	Expr  string `json:"expr"`
}

type dashboard struct {
	Title      string  `json:"title"`
	UID        string  `json:"uid"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

// labelValues is Grafana's label_values(metric selector, label) variable query.
var labelValues = regexp.MustCompile(`^\s*label_values\((.*),\s*[a-zA-Z_][a-zA-Z0-9_]*\s*\)\s*$`)

// DashboardQueries lists every PromQL expression of a Grafana dashboard (JSON model): each
// panel's targets, rows' panels included, and query variables. A panel without a query, or a
// target without an expression, is an error: it would show nothing.
func DashboardQueries(path string) (string, []Query, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", nil, err
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		return "", nil, fmt.Errorf("%s: %w", path, err)
	}
	if d.UID == "" || d.Title == "" {
		return "", nil, fmt.Errorf("%s: a dashboard needs a uid and a title", path)
	}
	var qs []Query
	var walk func([]panel) error
	walk = func(ps []panel) error {
		for _, p := range ps {
			if len(p.Panels) > 0 {
				if err := walk(p.Panels); err != nil {
					return err
				}
				continue
			}
			if p.Targets == nil { // a row header
				continue
			}
			for _, t := range p.Targets {
				if strings.TrimSpace(t.Expr) == "" {
					return fmt.Errorf("%s: panel %q: target %s has no expression", path, p.Title, t.RefID)
				}
				qs = append(qs, Query{Where: fmt.Sprintf("%s: panel %q %s", filepath.Base(path), p.Title, t.RefID), Expr: t.Expr})
			}
		}
		return nil
	}
	if err := walk(d.Panels); err != nil {
		return "", nil, err
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		q, _ := v.Query.(string)
		if m, ok := v.Query.(map[string]any); ok {
			q, _ = m["query"].(string)
		}
		if m := labelValues.FindStringSubmatch(q); m != nil {
			qs = append(qs, Query{Where: fmt.Sprintf("%s: variable %s", filepath.Base(path), v.Name), Expr: m[1]})
		} else if q != "" && !strings.HasPrefix(strings.TrimSpace(q), "label_values(") {
			return "", nil, fmt.Errorf("%s: variable %s: query %q is not label_values(selector, label)", path, v.Name, q)
		}
	}
	return d.Title, qs, nil
}

// synthetic are series Prometheus makes itself at each scrape.
var synthetic = map[string]bool{"up": true, "scrape_duration_seconds": true, "scrape_samples_scraped": true}

// Check returns a finding for each metric a query names that is neither exported (a family
// of exported, or a histogram's _bucket, _sum or _count series of one), nor recorded by a rule,
// nor one of Prometheus's own scrape series.
func Check(qs []Query, exported, recorded []string) []string {
	known := map[string]bool{}
	for _, n := range exported {
		known[n] = true
		for _, s := range []string{"_bucket", "_sum", "_count"} {
			known[n+s] = true
		}
	}
	for _, n := range recorded {
		known[n] = true
	}
	var out []string
	for _, q := range qs {
		names, err := MetricNames(q.Expr)
		if err != nil {
			out = append(out, fmt.Sprintf("%s: %v", q.Where, err))
			continue
		}
		if len(names) == 0 {
			out = append(out, fmt.Sprintf("%s: names no metric: %s", q.Where, q.Expr))
		}
		for _, n := range names {
			if !known[n] && !synthetic[n] {
				out = append(out, fmt.Sprintf("%s: %s is exported by no binary", q.Where, n))
			}
		}
	}
	sort.Strings(out)
	return out
}
