package deploycheck

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const (
	realRoot       = "../k8s"
	realDockerfile = "../Dockerfile"
)

// TestRealOverlaysPass: the manifests as committed pass every rule, and the evaluator saw the
// flows that matter (so a passing run is not an empty one).
func TestRealOverlaysPass(t *testing.T) {
	r, err := Check(Options{Root: realRoot, Dockerfile: realDockerfile})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range r.Findings {
		t.Errorf("finding: %s", f)
	}
	if got := strings.Join(r.Overlays, ","); got != "cell-a,cell-b,router" {
		t.Errorf("overlays = %s", got)
	}
	flows := map[string]bool{}
	for _, f := range r.Flows {
		flows[f.From+" -> "+f.To] = true
	}
	for _, want := range []string{
		"internet (203.0.113.7) -> slidecells-router/router",
		"slidecells-router/router -> slidecells-cell-a/cell",
		"slidecells-cell-a/cell -> slidecells-cell-a/renderer",
		"slidecells-cell-a/renderer -> slidecells-cell-a/preview",
		"slidecells-cell-b/cell -> slidecells-router/cockroachdb",
	} {
		if !flows[want] {
			t.Errorf("flow %s is not among the allowed flows", want)
		}
	}
	for _, never := range []string{
		"slidecells-cell-a/renderer -> slidecells-cell-a/cockroachdb",
		"slidecells-cell-a/renderer -> cloud metadata (169.254.169.254)",
		"slidecells-cell-a/renderer -> slidecells-cell-a/cell",
		"slidecells-cell-a/cell -> slidecells-cell-b/renderer",
		"internet (203.0.113.7) -> slidecells-cell-a/cell",
		"slidecells-cell-a/preview -> slidecells-cell-a/renderer",
	} {
		if flows[never] {
			t.Errorf("flow %s is allowed", never)
		}
	}
}

// Each case breaks the committed manifests in one way, as a change to an overlay would, and
// expects the rule that guards against it to fail.
func TestBrokenManifestsFail(t *testing.T) {
	cases := []struct {
		name string
		// overlay gets the patch (patches: entries) or the extra resource (resources:).
		overlay string
		patch   string
		// target is Kind/name of a JSON patch's object (strategic merge patches name theirs).
		target  string
		extra   string
		edit    func(t *testing.T, root string)
		rule    string
		message string
	}{
		{
			name: "renderer as root of the node", overlay: "cell-a", rule: RuleRenderer, message: "hostUsers must be false",
			patch: podPatch("StatefulSet/renderer", `
hostUsers: true
`),
		},
		{
			name: "renderer privileged", overlay: "cell-b", rule: RuleRenderer, message: "privileged",
			patch: containerPatch("StatefulSet/renderer", `
securityContext:
  privileged: true
`),
		},
		{
			name: "renderer with a capability its isolation does not need", target: "StatefulSet/renderer", overlay: "cell-a", rule: RuleRenderer, message: "SYS_PTRACE",
			patch: `
- op: add
  path: /spec/template/spec/containers/0/securityContext/capabilities/add/-
  value: SYS_PTRACE
`,
		},
		{
			name: "renderer with the sandbox switched off", target: "StatefulSet/renderer", overlay: "cell-a", rule: RuleRenderer, message: "sandbox",
			patch: `
- op: add
  path: /spec/template/spec/containers/0/args
  value: ["--no-sandbox"]
`,
		},
		{
			name: "renderer mounting the database client certificate", target: "StatefulSet/renderer", overlay: "cell-a", rule: RuleRenderer, message: "cell-db-client",
			patch: `
- op: add
  path: /spec/template/spec/volumes/-
  value: {name: db, secret: {secretName: cell-db-client}}
`,
		},
		{
			name: "a sidecar in the renderer pod", overlay: "cell-b", target: "StatefulSet/renderer", rule: RuleRenderer, message: "runs the renderer alone",
			patch: `
- op: add
  path: /spec/template/spec/containers/-
  value:
    name: proxy
    image: slidecells/router:v1
`,
		},
		{
			name: "cell without a memory limit", target: "Deployment/cell", overlay: "cell-a", rule: RuleLimits, message: "no memory limit",
			patch: `
- op: remove
  path: /spec/template/spec/containers/0/resources/limits/memory
`,
		},
		{
			name: "renderer without an ephemeral-storage limit", target: "StatefulSet/renderer", overlay: "cell-b", rule: RuleLimits, message: "no ephemeral-storage limit",
			patch: `
- op: remove
  path: /spec/template/spec/containers/0/resources/limits/ephemeral-storage
`,
		},
		{
			name: "cell running as root", overlay: "cell-a", rule: RulePodSecurity, message: "runAsNonRoot",
			patch: podPatch("Deployment/cell", `
securityContext:
  runAsNonRoot: false
  runAsUser: 0
`),
		},
		{
			name: "preview host with a writable root file system", target: "Deployment/preview", overlay: "cell-b", rule: RulePodSecurity, message: "readOnlyRootFilesystem",
			patch: `
- op: replace
  path: /spec/template/spec/containers/0/securityContext/readOnlyRootFilesystem
  value: false
`,
		},
		{
			name: "a NetworkPolicy that lets renderers reach the database", overlay: "cell-a", rule: RuleFlow,
			message: "slidecells-cell-a/renderer to slidecells-cell-a/cockroachdb",
			extra: `
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: allow-within-namespace
spec:
  podSelector: {}
  policyTypes: [Ingress, Egress]
  ingress:
    - from:
        - podSelector: {}
  egress:
    - to:
        - podSelector: {}
`,
		},
		{
			name: "renderer egress to any address", overlay: "cell-b", rule: RuleFlow,
			message: "slidecells-cell-b/renderer to cloud metadata (169.254.169.254)",
			extra: `
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: renderer-assets
spec:
  podSelector:
    matchLabels:
      slidecells.io/role: renderer
  policyTypes: [Egress]
  egress:
    - to:
        - ipBlock:
            cidr: 0.0.0.0/0
`,
		},
		{
			name: "a cell's backend opened to every pod of the cluster", overlay: "cell-a", rule: RuleFlow,
			message: "default/some-other-app to slidecells-cell-a/cell",
			extra: `
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: cell-open
spec:
  podSelector:
    matchLabels:
      slidecells.io/role: cell
  policyTypes: [Ingress]
  ingress:
    - ports:
        - port: http
`,
		},
		{
			name: "monitoring let into the renderer's control port", overlay: "cell-a", rule: RuleFlow,
			message: "the flow table allows only port metrics",
			extra: `
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: renderer-scrape-everything
spec:
  podSelector:
    matchLabels:
      slidecells.io/role: renderer
  policyTypes: [Ingress]
  ingress:
    - from:
        - namespaceSelector:
            matchLabels:
              slidecells.io/monitoring: "true"
`,
		},
		{
			name: "renderers cut off from their preview host", overlay: "cell-b", rule: RuleFlowBlocked,
			message: "slidecells-cell-b/renderer to slidecells-cell-b/preview",
			patch: `
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: renderer
spec:
  egress:
    - to:
        - podSelector:
            matchLabels:
              slidecells.io/role: preview
      ports:
        - port: 9999
`,
		},
		{
			name: "the cell's Service made public", overlay: "cell-a", rule: RulePublic, message: "only the router is public",
			patch: `
apiVersion: v1
kind: Service
metadata:
  name: cell
spec:
  type: LoadBalancer
`,
		},
		{
			name: "an unknown field", overlay: "cell-a", rule: RuleDecode, message: `unknown field "spec.template.spec.containers[0].imagePullPolicyy"`,
			patch: containerPatch("Deployment/cell", `
imagePullPolicyy: Always
`),
		},
		{
			name: "a wrong type", target: "Deployment/router", overlay: "router", rule: RuleDecode, message: "cannot unmarshal string",
			patch: `
- op: replace
  path: /spec/replicas
  value: "three"
`,
		},
		{
			name: "a field in the wrong case", target: "Deployment/router", overlay: "router", rule: RuleDecode, message: "readonlyRootFilesystem",
			patch: `
- op: add
  path: /spec/template/spec/containers/0/securityContext/readonlyRootFilesystem
  value: true
`,
		},
		{
			name: "a misspelt field in the alert rules", target: "PrometheusRule/slidecells", overlay: "router", rule: RuleDecode, message: "unknown field",
			patch: `
- op: add
  path: /spec/groups/0/rules/0/annotation
  value: {summary: x}
`,
		},
		{
			name: "an alert rule without an expression", target: "PrometheusRule/slidecells", overlay: "router", rule: RuleDecode, message: "exactly one of record and alert",
			patch: `
- op: remove
  path: /spec/groups/1/rules/0/expr
`,
		},
		{
			name: "a kind the checker cannot validate", overlay: "router", rule: RuleDecode, message: "is not one deploy-check can validate",
			extra: `
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: cells
spec: {}
`,
		},
		{
			name: "an image no Dockerfile stage builds", target: "Deployment/cell", overlay: "cell-a", rule: RuleImage, message: `no stage "worker"`,
			patch: `
- op: replace
  path: /spec/template/spec/containers/0/image
  value: slidecells/worker:v1
`,
		},
		{
			name: "a floating third-party tag", target: "StatefulSet/cockroachdb", overlay: "router", rule: RuleImage, message: "not pinned",
			patch: `
- op: replace
  path: /spec/template/spec/containers/0/image
  value: cockroachdb/cockroach:latest
`,
		},
		{
			name: "a signing key inline", target: "Deployment/cell", overlay: "cell-a", rule: RuleSecret, message: "RENDER_TICKET_SIGNING_KEY looks like a secret",
			patch: `
- op: add
  path: /spec/template/spec/containers/0/env/-
  value: {name: RENDER_TICKET_SIGNING_KEY, value: "k1:c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0"}
`,
		},
		{
			name: "a database password in a URL", overlay: "cell-b", rule: RuleSecret, message: "URL with a password",
			edit: func(t *testing.T, root string) {
				p := filepath.Join(root, "overlays/cell-b/cell.env")
				b, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				s := strings.Replace(string(b), "postgresql://cell@", "postgresql://cell:hunter2@", 1)
				if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
					t.Fatal(err)
				}
			},
		},
		{
			name: "a Secret kept with the manifests", overlay: "router", rule: RuleSecret, message: "never kept with the manifests",
			edit: func(t *testing.T, root string) {
				appendFile(t, filepath.Join(root, "overlays/router/kustomization.yaml"),
					"secretGenerator:\n  - name: router-unknown-hash-key\n    literals:\n      - key=0123456789abcdef\n")
			},
		},
		{
			name: "a renderer the cell does not know", target: "StatefulSet/renderer", overlay: "cell-a", rule: RuleConfig, message: "does not list renderer cell-a-renderer-2",
			patch: `
- op: replace
  path: /spec/replicas
  value: 3
`,
		},
		{
			name: "an attempt larger than the renderer pod", target: "StatefulSet/renderer", overlay: "cell-b", rule: RuleRenderer, message: "exceeds the memory limit",
			patch: `
- op: replace
  path: /spec/template/spec/containers/0/resources/limits/memory
  value: 2Gi
`,
		},
		{
			name: "renderers sent to another preview host than the cell's", target: "StatefulSet/renderer", overlay: "cell-a", rule: RuleConfig, message: "differs from the cell's RENDER_RUNTIME_NAVIGATION_BASE_URL",
			patch: `
- op: replace
  path: /spec/template/spec/containers/0/env/5/value
  value: http://preview-other:8090
`,
		},
		{
			name: "renderer control API addressed over http across pods", overlay: "cell-a", rule: RuleConfig,
			message: "across pods the control API is https only",
			edit: func(t *testing.T, root string) {
				p := filepath.Join(root, "overlays/cell-a/render-workers.json")
				b, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				s := strings.Replace(string(b), `"https://renderer-1.`, `"http://renderer-1.`, 1)
				if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
					t.Fatal(err)
				}
			},
		},
		{
			name: "preview host pulling over http across pods", overlay: "cell-b", rule: RuleConfig, message: `PREVIEW_BACKEND_URL "http://cell:8081" is not https`,
			patch: containerPatch("Deployment/preview", `
env:
  - name: PREVIEW_BACKEND_URL
    value: http://cell:8081
`),
		},
		{
			name: "renderer serving its control API without TLS", overlay: "cell-a", rule: RuleConfig, message: "RENDER_TLS_KEY_FILE is not a file of a Secret",
			patch: containerPatch("StatefulSet/renderer", `
env:
  - name: RENDER_TLS_KEY_FILE
    value: /tmp/renderer/tls.key
`),
		},
		{
			name: "renderer probed over plain http", overlay: "cell-b", rule: RuleConfig, message: "is not scheme HTTPS",
			patch: containerPatch("StatefulSet/renderer", `
livenessProbe:
  httpGet:
    scheme: HTTP
`),
		},
		{
			name: "cell trusting no private CA for its renderers", overlay: "cell-a", rule: RuleConfig, message: "RENDER_WORKERS_CA_FILE is not a file of a Secret",
			patch: containerPatch("Deployment/cell", `
env:
  - name: RENDER_WORKERS_CA_FILE
    value: /tmp/ca.crt
`),
		},
		{
			name: "a render profile of another contract", overlay: "cell-a", rule: RuleConfig, message: `declares contract_version "render-execution.v0"`,
			edit: func(t *testing.T, root string) {
				p := filepath.Join(root, "components/release/render-profile.json")
				b, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				s := strings.Replace(string(b), `"render-execution.v1"`, `"render-execution.v0"`, 1)
				if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
					t.Fatal(err)
				}
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			root, dockerfile := copyTree(t)
			kust := filepath.Join(root, "overlays", tc.overlay, "kustomization.yaml")
			if tc.patch != "" {
				target := ""
				if tc.target != "" {
					kind, name, _ := strings.Cut(tc.target, "/")
					target = "    target:\n      kind: " + kind + "\n      name: " + name + "\n"
				}
				if err := os.WriteFile(filepath.Join(root, "overlays", tc.overlay, "broken-patch.yaml"), []byte(tc.patch), 0o644); err != nil {
					t.Fatal(err)
				}
				appendFile(t, kust, "patches:\n  - path: broken-patch.yaml\n"+target)
			}
			if tc.extra != "" {
				if err := os.WriteFile(filepath.Join(root, "overlays", tc.overlay, "broken-extra.yaml"), []byte(tc.extra), 0o644); err != nil {
					t.Fatal(err)
				}
				b, err := os.ReadFile(kust)
				if err != nil {
					t.Fatal(err)
				}
				k := strings.Replace(string(b), "\nresources:\n", "\nresources:\n  - broken-extra.yaml\n", 1)
				if err := os.WriteFile(kust, []byte(k), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if tc.edit != nil {
				tc.edit(t, root)
			}
			r, err := Check(Options{Root: root, Dockerfile: dockerfile})
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range r.Findings {
				if os.Getenv("DEPLOYCHECK_SHOW") != "" {
					t.Logf("%s", f)
				}
			}
			for _, f := range r.Findings {
				if f.Rule == RuleRender {
					t.Fatalf("the broken overlay did not render: %s", f)
				}
				if f.Rule == tc.rule && strings.Contains(f.Message, tc.message) {
					return
				}
			}
			t.Errorf("no [%s] finding containing %q; findings:", tc.rule, tc.message)
			for _, f := range r.Findings {
				t.Logf("  %s", f)
			}
		})
	}
}

func TestImages(t *testing.T) {
	stages := dockerStages("FROM golang:1 AS build\nFROM scratch AS cell\nfrom --platform=$BUILDPLATFORM debian AS Renderer\n")
	for ref, ok := range map[string]bool{
		"slidecells/cell:v1.2.3":                  true,
		"registry.example:5000/slidecells/cell:1": true,
		"slidecells/renderer@sha256:abcd":         true,
		"slidecells/cell":                         false,
		"slidecells/cell:latest":                  false,
		"slidecells/router:v1":                    false,
		"cockroachdb/cockroach:v25.2.4":           true,
		"cockroachdb/cockroach:latest-v25.2":      false,
		"nginx:1.27":                              false,
	} {
		if got := checkImage(ref, stages) == ""; got != ok {
			t.Errorf("checkImage(%q) ok = %v, want %v (%s)", ref, got, ok, checkImage(ref, stages))
		}
	}
}

// podPatch is a strategic merge patch of a workload's pod spec (target is Kind/name): fields is
// YAML at the pod spec's level.
func podPatch(target, fields string) string {
	kind, name, _ := strings.Cut(target, "/")
	return fmt.Sprintf("apiVersion: apps/v1\nkind: %s\nmetadata:\n  name: %s\nspec:\n  template:\n    spec:\n", kind, name) +
		indent(fields, "      ")
}

// containerPatch is a strategic merge patch of the container named like its workload (target is
// Kind/name): fields is YAML at the container's level.
func containerPatch(target, fields string) string {
	_, name, _ := strings.Cut(target, "/")
	return podPatch(target, "containers:\n  - name: "+name+"\n"+indent(fields, "    "))
}

// indent puts prefix before every line of s that is not empty.
func indent(s, prefix string) string {
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimPrefix(s, "\n"), "\n") {
		if l != "" {
			b.WriteString(prefix + l + "\n")
		}
	}
	return b.String()
}

func copyTree(t *testing.T) (root, dockerfile string) {
	t.Helper()
	dir := t.TempDir()
	root = filepath.Join(dir, "k8s")
	err := filepath.WalkDir(realRoot, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(realRoot, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(root, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(root, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(realDockerfile)
	if err != nil {
		t.Fatal(err)
	}
	dockerfile = filepath.Join(dir, "Dockerfile")
	if err := os.WriteFile(dockerfile, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return root, dockerfile
}

func appendFile(t *testing.T, p, s string) {
	t.Helper()
	f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
}
