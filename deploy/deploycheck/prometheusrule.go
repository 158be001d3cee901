package deploycheck

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PrometheusRule is the Prometheus Operator's monitoring.coreos.com/v1 PrometheusRule, as far as
// its CRD schema goes (groups of recording and alerting rules), so that strict decoding finds a
// misspelt field. The operator's Go module is not a dependency: this is the schema.
type PrometheusRule struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              PrometheusRuleSpec `json:"spec"`
}

// PrometheusRuleSpec holds the rule groups.
type PrometheusRuleSpec struct {
	Groups []PrometheusRuleGroup `json:"groups"`
}

// PrometheusRuleGroup is one rule group.
type PrometheusRuleGroup struct {
	Name                    string               `json:"name"`
	Interval                string               `json:"interval,omitempty"`
	QueryOffset             string               `json:"query_offset,omitempty"`
	Limit                   *int                 `json:"limit,omitempty"`
	PartialResponseStrategy string               `json:"partial_response_strategy,omitempty"`
	Labels                  map[string]string    `json:"labels,omitempty"`
	Rules                   []PrometheusRuleRule `json:"rules"`
}

// PrometheusRuleRule is one recording rule (record) or alert (alert).
type PrometheusRuleRule struct {
	Record        string            `json:"record,omitempty"`
	Alert         string            `json:"alert,omitempty"`
	Expr          string            `json:"expr"`
	For           string            `json:"for,omitempty"`
	KeepFiringFor string            `json:"keep_firing_for,omitempty"`
	Labels        map[string]string `json:"labels,omitempty"`
	Annotations   map[string]string `json:"annotations,omitempty"`
}

// checkPrometheusRule reports what the operator's admission webhook refuses: a group without a
// name or rules, a rule that is both or neither of record and alert, or has no expression.
func checkPrometheusRule(o Object, pr *PrometheusRule) []Finding {
	var out []Finding
	add := func(format string, args ...any) {
		out = append(out, Finding{Rule: RuleDecode, Overlay: o.Overlay, Object: o.Ref(), Message: fmt.Sprintf(format, args...)})
	}
	for i, g := range pr.Spec.Groups {
		if g.Name == "" || len(g.Rules) == 0 {
			add("group %d needs a name and rules", i)
		}
		for j, r := range g.Rules {
			if (r.Record == "") == (r.Alert == "") || r.Expr == "" {
				add("group %s rule %d: exactly one of record and alert, and an expr", g.Name, j)
			}
		}
	}
	return out
}
