package deploycheck

import (
	"fmt"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	nodev1 "k8s.io/api/node/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Labels the rules identify pods and namespaces by.
const (
	// LabelRole names what a pod is: router, cell, preview, renderer, database, cellctl.
	LabelRole = "slidecells.io/role"
	// LabelTier names what a namespace holds: edge (router, directory) or cell.
	LabelTier = "slidecells.io/tier"
	// labelNamespaceName is the label Kubernetes sets on every namespace.
	labelNamespaceName = "kubernetes.io/metadata.name"
)

// workload is a pod template and where it runs.
type workload struct {
	obj       *Object
	namespace string
	name      string
	replicas  int
	// serviceName is a StatefulSet's governing Service.
	serviceName string
	selector    *metav1.LabelSelector
	labels      map[string]string
	spec        *corev1.PodSpec
	// claims are a StatefulSet's volume claim templates: volumes its pods have too.
	claims []string
}

func (w *workload) role() string { return w.labels[LabelRole] }

// cluster is every overlay's output together, as one cluster would hold it.
type cluster struct {
	objs           []*Object
	namespaces     map[string]map[string]string
	workloads      []*workload
	services       map[string][]*corev1.Service
	configMaps     map[string]map[string]*corev1.ConfigMap
	policies       map[string][]*networkingv1.NetworkPolicy
	runtimeClasses map[string]*nodev1.RuntimeClass
	findings       []Finding
}

func newCluster(objs []Object) *cluster {
	c := &cluster{
		namespaces:     map[string]map[string]string{},
		services:       map[string][]*corev1.Service{},
		configMaps:     map[string]map[string]*corev1.ConfigMap{},
		policies:       map[string][]*networkingv1.NetworkPolicy{},
		runtimeClasses: map[string]*nodev1.RuntimeClass{},
	}
	seen := map[string]string{}
	for i := range objs {
		o := &objs[i]
		c.objs = append(c.objs, o)
		id := o.APIVersion + " " + o.Ref()
		if prev, dup := seen[id]; dup {
			c.add(RuleReference, o, "rendered by overlay %s as well: two overlays would overwrite each other", prev)
		}
		seen[id] = o.Overlay
		switch t := o.Typed.(type) {
		case *corev1.Namespace:
			l := map[string]string{}
			for k, v := range t.Labels {
				l[k] = v
			}
			l[labelNamespaceName] = t.Name
			c.namespaces[t.Name] = l
		case *corev1.Service:
			c.services[t.Namespace] = append(c.services[t.Namespace], t)
		case *corev1.ConfigMap:
			if c.configMaps[t.Namespace] == nil {
				c.configMaps[t.Namespace] = map[string]*corev1.ConfigMap{}
			}
			c.configMaps[t.Namespace][t.Name] = t
		case *networkingv1.NetworkPolicy:
			c.policies[t.Namespace] = append(c.policies[t.Namespace], t)
		case *nodev1.RuntimeClass:
			c.runtimeClasses[t.Name] = t
		case *appsv1.Deployment:
			c.addWorkload(o, t.Spec.Replicas, "", t.Spec.Selector, &t.Spec.Template)
		case *appsv1.StatefulSet:
			c.addWorkload(o, t.Spec.Replicas, t.Spec.ServiceName, t.Spec.Selector, &t.Spec.Template)
			for _, vct := range t.Spec.VolumeClaimTemplates {
				w := c.workloads[len(c.workloads)-1]
				w.claims = append(w.claims, vct.Name)
			}
		case *appsv1.DaemonSet:
			one := int32(1)
			c.addWorkload(o, &one, "", t.Spec.Selector, &t.Spec.Template)
		case *batchv1.Job:
			c.addWorkload(o, t.Spec.Parallelism, "", nil, &t.Spec.Template)
		case *batchv1.CronJob:
			c.addWorkload(o, t.Spec.JobTemplate.Spec.Parallelism, "", nil, &t.Spec.JobTemplate.Spec.Template)
		}
	}
	for _, o := range c.objs {
		if o.Namespace != "" && o.Typed != nil {
			if _, ok := c.namespaces[o.Namespace]; !ok {
				c.add(RuleReference, o, "namespace %s is not rendered by any overlay (its labels decide the network rules)", o.Namespace)
			}
		}
	}
	return c
}

// ContainerImages returns the images of a workload object's containers (none for other kinds).
func ContainerImages(o Object) []string {
	var spec *corev1.PodSpec
	switch t := o.Typed.(type) {
	case *appsv1.Deployment:
		spec = &t.Spec.Template.Spec
	case *appsv1.StatefulSet:
		spec = &t.Spec.Template.Spec
	case *appsv1.DaemonSet:
		spec = &t.Spec.Template.Spec
	case *batchv1.Job:
		spec = &t.Spec.Template.Spec
	case *batchv1.CronJob:
		spec = &t.Spec.JobTemplate.Spec.Template.Spec
	default:
		return nil
	}
	var out []string
	for _, ct := range containers(spec) {
		out = append(out, ct.Image)
	}
	return out
}

func (c *cluster) addWorkload(o *Object, replicas *int32, serviceName string, sel *metav1.LabelSelector, t *corev1.PodTemplateSpec) {
	n := 1
	if replicas != nil {
		n = int(*replicas)
	}
	c.workloads = append(c.workloads, &workload{obj: o, namespace: o.Namespace, name: o.Name, replicas: n,
		serviceName: serviceName, selector: sel, labels: t.Labels, spec: &t.Spec})
}

func (c *cluster) add(rule string, o *Object, format string, args ...any) {
	c.findings = append(c.findings, Finding{Rule: rule, Overlay: o.Overlay, Object: o.Ref(), Message: fmt.Sprintf(format, args...)})
}

// selects reports whether a label selector given as a map selects the labels.
func selects(sel map[string]string, l map[string]string) bool {
	if len(sel) == 0 {
		return false
	}
	return labels.SelectorFromSet(sel).Matches(labels.Set(l))
}

// matches reports whether a metav1.LabelSelector matches the labels; a nil selector matches
// nothing, an empty one everything (Kubernetes' rules for NetworkPolicy peers).
func matches(sel *metav1.LabelSelector, l map[string]string) (bool, error) {
	if sel == nil {
		return false, nil
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return false, err
	}
	return s.Matches(labels.Set(l)), nil
}

// serviceWorkloads returns the workloads a Service's selector picks.
func (c *cluster) serviceWorkloads(s *corev1.Service) []*workload {
	var out []*workload
	for _, w := range c.workloads {
		if w.namespace == s.Namespace && selects(s.Spec.Selector, w.labels) {
			out = append(out, w)
		}
	}
	return out
}

func (c *cluster) service(ns, name string) *corev1.Service {
	for _, s := range c.services[ns] {
		if s.Name == name {
			return s
		}
	}
	return nil
}

func (c *cluster) workloadsOf(ns, role string) []*workload {
	var out []*workload
	for _, w := range c.workloads {
		if w.namespace == ns && w.role() == role {
			out = append(out, w)
		}
	}
	return out
}

func sortedKeys[K ~string, V any](m map[K]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, string(k))
	}
	sort.Strings(out)
	return out
}
