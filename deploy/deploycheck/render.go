package deploycheck

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	nodev1 "k8s.io/api/node/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	sjson "sigs.k8s.io/json"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// Object is one rendered Kubernetes object, decoded into its k8s.io/api type.
type Object struct {
	// Overlay is the overlay folder that rendered it (its name under overlays/).
	Overlay    string
	APIVersion string
	Kind       string
	Namespace  string
	Name       string
	// JSON is the object as kustomize rendered it.
	JSON []byte
	// Typed is a pointer to the k8s.io/api value (nil when the kind is unknown or the
	// object did not decode).
	Typed any
}

// Ref names the object in findings: kind/namespace/name.
func (o *Object) Ref() string {
	if o.Namespace == "" {
		return o.Kind + "/" + o.Name
	}
	return o.Kind + "/" + o.Namespace + "/" + o.Name
}

// kinds are the API types the manifests may use. Anything else is a finding: the checker
// cannot validate a kind it has no type for, and an unvalidated object is not deployed.
var kinds = map[string]func() any{
	"v1/Namespace":                             func() any { return &corev1.Namespace{} },
	"v1/Service":                               func() any { return &corev1.Service{} },
	"v1/ServiceAccount":                        func() any { return &corev1.ServiceAccount{} },
	"v1/ConfigMap":                             func() any { return &corev1.ConfigMap{} },
	"v1/Secret":                                func() any { return &corev1.Secret{} },
	"v1/PersistentVolumeClaim":                 func() any { return &corev1.PersistentVolumeClaim{} },
	"apps/v1/Deployment":                       func() any { return &appsv1.Deployment{} },
	"apps/v1/StatefulSet":                      func() any { return &appsv1.StatefulSet{} },
	"apps/v1/DaemonSet":                        func() any { return &appsv1.DaemonSet{} },
	"batch/v1/Job":                             func() any { return &batchv1.Job{} },
	"batch/v1/CronJob":                         func() any { return &batchv1.CronJob{} },
	"networking.k8s.io/v1/NetworkPolicy":       func() any { return &networkingv1.NetworkPolicy{} },
	"networking.k8s.io/v1/Ingress":             func() any { return &networkingv1.Ingress{} },
	"policy/v1/PodDisruptionBudget":            func() any { return &policyv1.PodDisruptionBudget{} },
	"node.k8s.io/v1/RuntimeClass":              func() any { return &nodev1.RuntimeClass{} },
	"rbac.authorization.k8s.io/v1/Role":        func() any { return &rbacv1.Role{} },
	"rbac.authorization.k8s.io/v1/RoleBinding": func() any { return &rbacv1.RoleBinding{} },
	"monitoring.coreos.com/v1/PrometheusRule":  func() any { return &PrometheusRule{} },
}

// Overlays lists the overlay folders below root/overlays, sorted.
func Overlays(root string) ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(root, "overlays"))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() {
			if _, err := os.Stat(filepath.Join(root, "overlays", e.Name(), "kustomization.yaml")); err == nil {
				out = append(out, e.Name())
			}
		}
	}
	sort.Strings(out)
	if len(out) == 0 {
		return nil, fmt.Errorf("no overlays below %s", filepath.Join(root, "overlays"))
	}
	return out, nil
}

// RenderYAML renders one overlay as kustomize build would print it.
func RenderYAML(root, overlay string) ([]byte, error) {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	m, err := k.Run(filesys.MakeFsOnDisk(), filepath.Join(root, "overlays", overlay))
	if err != nil {
		return nil, err
	}
	return m.AsYaml()
}

// Render renders one overlay with kustomize and decodes every object strictly. A kustomize
// failure is an error; objects that do not decode come back with their findings.
func Render(root, overlay string) ([]Object, []Finding, error) {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	m, err := k.Run(filesys.MakeFsOnDisk(), filepath.Join(root, "overlays", overlay))
	if err != nil {
		return nil, nil, err
	}
	var objs []Object
	var findings []Finding
	for _, r := range m.Resources() {
		b, err := r.MarshalJSON()
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", r.CurId(), err)
		}
		o := Object{Overlay: overlay, APIVersion: r.GetApiVersion(), Kind: r.GetKind(),
			Namespace: r.GetNamespace(), Name: r.GetName(), JSON: b}
		if f := decode(&o); len(f) > 0 {
			findings = append(findings, f...)
		}
		objs = append(objs, o)
	}
	return objs, findings, nil
}

// decode fills o.Typed by strict decoding: unknown, duplicate and wrongly cased fields are
// findings, and so is a value that does not fit its field's type.
func decode(o *Object) []Finding {
	newT, ok := kinds[o.APIVersion+"/"+o.Kind]
	if !ok {
		known := make([]string, 0, len(kinds))
		for k := range kinds {
			known = append(known, k)
		}
		sort.Strings(known)
		return []Finding{{Rule: RuleDecode, Object: o.Ref(), Overlay: o.Overlay,
			Message: fmt.Sprintf("kind %s/%s is not one deploy-check can validate (known: %s)", o.APIVersion, o.Kind, strings.Join(known, ", "))}}
	}
	v := newT()
	strict, err := sjson.UnmarshalStrict(o.JSON, v)
	var out []Finding
	if err != nil {
		out = append(out, Finding{Rule: RuleDecode, Object: o.Ref(), Overlay: o.Overlay, Message: "does not decode as " + o.APIVersion + " " + o.Kind + ": " + err.Error()})
	}
	for _, e := range strict {
		out = append(out, Finding{Rule: RuleDecode, Object: o.Ref(), Overlay: o.Overlay, Message: e.Error()})
	}
	if pr, ok := v.(*PrometheusRule); ok && len(out) == 0 {
		out = checkPrometheusRule(*o, pr)
	}
	if len(out) == 0 {
		o.Typed = v
	}
	return out
}
