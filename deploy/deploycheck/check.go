package deploycheck

import (
	"fmt"
	"os"
	"sort"
)

// Rules: each finding names the rule that failed.
const (
	// RuleRender: kustomize could not render an overlay.
	RuleRender = "render"
	// RuleDecode: an object does not decode strictly into its k8s.io/api type, or its kind is
	// not known.
	RuleDecode = "decode"
	// RuleReference: something refers to an object that is not there (a ConfigMap, a volume,
	// a Service, a runtime class, a namespace), a selector misses its pods, or an object is
	// rendered twice.
	RuleReference = "reference"
	// RuleLabels: a pod or namespace lacks the labels the network rules identify it by.
	RuleLabels = "labels"
	// RuleLimits: a container lacks a CPU, memory or ephemeral-storage request or limit, or a
	// request exceeds its limit.
	RuleLimits = "limits"
	// RulePodSecurity: a pod's security settings are weaker than the rules for every pod.
	RulePodSecurity = "pod-security"
	// RuleRenderer: the renderer's pod is weaker than its isolation allows.
	RuleRenderer = "renderer-security"
	// RuleImage: an image is not built by the Dockerfile, is not pinned, or is not an allowed
	// third-party image.
	RuleImage = "image"
	// RuleSecret: a secret is inline in the manifests or reaches a container other than as a
	// file.
	RuleSecret = "secret"
	// RulePublic: something other than the router is exposed outside the cluster.
	RulePublic = "public"
	// RuleFlow: the NetworkPolicies allow a flow that the flow table does not.
	RuleFlow = "flow"
	// RuleFlowBlocked: the NetworkPolicies block a flow the deployment needs.
	RuleFlowBlocked = "flow-blocked"
	// RuleConfig: settings of different workloads do not fit together.
	RuleConfig = "config"
)

// Finding is one failed rule.
type Finding struct {
	Rule    string `json:"rule"`
	Overlay string `json:"overlay,omitempty"`
	Object  string `json:"object,omitempty"`
	Message string `json:"message"`
}

func (f Finding) String() string {
	where := f.Object
	if f.Overlay != "" {
		where = f.Overlay + ": " + where
	}
	if where == "" {
		return fmt.Sprintf("[%s] %s", f.Rule, f.Message)
	}
	return fmt.Sprintf("[%s] %s: %s", f.Rule, where, f.Message)
}

// Options says what to check.
type Options struct {
	// Root is the manifests' folder (deploy/k8s): overlays/* are rendered.
	Root string
	// Dockerfile is the multi-stage Dockerfile whose stages build the slidecells/* images.
	Dockerfile string
}

// Report is what Check found.
type Report struct {
	Overlays []string
	Objects  []Object
	// Flows are the flows the NetworkPolicies allow, as the evaluator computed them.
	Flows    []Flow
	Findings []Finding
}

// OK reports whether no rule failed.
func (r *Report) OK() bool { return len(r.Findings) == 0 }

// Check renders every overlay and runs every rule. The error is for what stops the check
// itself (a missing folder or Dockerfile); a broken manifest is a finding.
func Check(opts Options) (*Report, error) {
	overlays, err := Overlays(opts.Root)
	if err != nil {
		return nil, err
	}
	df, err := os.ReadFile(opts.Dockerfile)
	if err != nil {
		return nil, err
	}
	stages := dockerStages(string(df))
	r := &Report{Overlays: overlays}
	for _, ov := range overlays {
		objs, findings, err := Render(opts.Root, ov)
		if err != nil {
			r.Findings = append(r.Findings, Finding{Rule: RuleRender, Overlay: ov, Message: err.Error()})
			continue
		}
		r.Objects = append(r.Objects, objs...)
		r.Findings = append(r.Findings, findings...)
	}
	c := newCluster(r.Objects)
	r.Findings = append(r.Findings, c.findings...)
	r.Findings = append(r.Findings, c.checkReferences()...)
	r.Findings = append(r.Findings, c.checkPods(stages)...)
	r.Findings = append(r.Findings, c.checkSecrets()...)
	r.Findings = append(r.Findings, c.checkPublic()...)
	flows, ff := c.checkFlows()
	r.Flows = flows
	r.Findings = append(r.Findings, ff...)
	r.Findings = append(r.Findings, c.checkConfig()...)
	sort.SliceStable(r.Findings, func(i, j int) bool {
		a, b := r.Findings[i], r.Findings[j]
		if a.Overlay != b.Overlay {
			return a.Overlay < b.Overlay
		}
		return a.Object < b.Object
	})
	return r, nil
}
