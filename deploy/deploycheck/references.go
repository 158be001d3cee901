package deploycheck

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// containers returns the init containers and the containers of a pod.
func containers(spec *corev1.PodSpec) []*corev1.Container {
	var out []*corev1.Container
	for i := range spec.InitContainers {
		out = append(out, &spec.InitContainers[i])
	}
	for i := range spec.Containers {
		out = append(out, &spec.Containers[i])
	}
	return out
}

// checkReferences: what the API server would refuse, or what would leave a pod pending.
func (c *cluster) checkReferences() []Finding {
	var out []Finding
	add := func(o *Object, format string, args ...any) {
		out = append(out, Finding{Rule: RuleReference, Overlay: o.Overlay, Object: o.Ref(), Message: fmt.Sprintf(format, args...)})
	}
	for _, w := range c.workloads {
		if w.obj.Kind == "Deployment" || w.obj.Kind == "StatefulSet" || w.obj.Kind == "DaemonSet" {
			if ok, err := matches(w.selector, w.labels); err != nil || !ok {
				add(w.obj, "spec.selector does not select the pod template's labels")
			}
		}
		if w.obj.Kind == "StatefulSet" {
			s := c.service(w.namespace, w.serviceName)
			if s == nil {
				add(w.obj, "serviceName %q: no such Service in %s", w.serviceName, w.namespace)
			} else if s.Spec.ClusterIP != corev1.ClusterIPNone {
				add(w.obj, "serviceName %q is not a headless Service (clusterIP: None): pods get no stable names", w.serviceName)
			}
		}
		if rc := w.spec.RuntimeClassName; rc != nil {
			if _, ok := c.runtimeClasses[*rc]; !ok {
				add(w.obj, "runtimeClassName %q: no such RuntimeClass in any overlay", *rc)
			}
		}
		volumes := map[string]*corev1.Volume{}
		for _, name := range w.claims {
			volumes[name] = &corev1.Volume{Name: name}
		}
		for i := range w.spec.Volumes {
			v := &w.spec.Volumes[i]
			volumes[v.Name] = v
			if v.ConfigMap != nil && !optional(v.ConfigMap.Optional) && c.configMap(w.namespace, v.ConfigMap.Name) == nil {
				add(w.obj, "volume %s: ConfigMap %s is not rendered", v.Name, v.ConfigMap.Name)
			}
		}
		for _, ct := range containers(w.spec) {
			for _, m := range ct.VolumeMounts {
				if volumes[m.Name] == nil {
					add(w.obj, "container %s mounts volume %s, which the pod does not have", ct.Name, m.Name)
				}
			}
			for _, ef := range ct.EnvFrom {
				if ef.ConfigMapRef != nil && !optional(ef.ConfigMapRef.Optional) && c.configMap(w.namespace, ef.ConfigMapRef.Name) == nil {
					add(w.obj, "container %s: envFrom ConfigMap %s is not rendered", ct.Name, ef.ConfigMapRef.Name)
				}
			}
			for _, e := range ct.Env {
				if e.ValueFrom != nil && e.ValueFrom.ConfigMapKeyRef != nil && !optional(e.ValueFrom.ConfigMapKeyRef.Optional) {
					ref := e.ValueFrom.ConfigMapKeyRef
					cm := c.configMap(w.namespace, ref.Name)
					if cm == nil {
						add(w.obj, "container %s: %s names ConfigMap %s, which is not rendered", ct.Name, e.Name, ref.Name)
					} else if _, ok := cm.Data[ref.Key]; !ok {
						add(w.obj, "container %s: %s names key %s of ConfigMap %s, which has no such key", ct.Name, e.Name, ref.Key, ref.Name)
					}
				}
			}
		}
	}
	for _, ns := range sortedKeys(c.services) {
		for _, s := range c.services[ns] {
			o := c.objectOf(s)
			picked := c.serviceWorkloads(s)
			if len(picked) == 0 {
				add(o, "selector %v selects no pod", s.Spec.Selector)
				continue
			}
			for _, p := range s.Spec.Ports {
				tp := p.TargetPort
				if (tp.Type == intstr.Int && tp.IntVal == 0) || (tp.Type == intstr.String && tp.StrVal == "") {
					tp = intstr.FromInt32(p.Port)
				}
				if !anyPort(picked, tp) {
					add(o, "port %s: target port %s is not a port of the pods it selects", p.Name, tp.String())
				}
			}
		}
	}
	for _, o := range c.objs {
		if pdb, ok := o.Typed.(*policyv1.PodDisruptionBudget); ok {
			found := false
			for _, w := range c.workloads {
				if w.namespace == pdb.Namespace {
					if m, _ := matches(pdb.Spec.Selector, w.labels); m {
						found = true
					}
				}
			}
			if !found {
				add(o, "selector selects no pod")
			}
		}
	}
	return out
}

func optional(b *bool) bool { return b != nil && *b }

func (c *cluster) configMap(ns, name string) *corev1.ConfigMap {
	return c.configMaps[ns][name]
}

// objectOf finds the rendered object of a typed value.
func (c *cluster) objectOf(v any) *Object {
	for _, o := range c.objs {
		if o.Typed == v {
			return o
		}
	}
	return &Object{Kind: "?"}
}

// anyPort reports whether some container of the workloads declares the port (by number or name).
func anyPort(ws []*workload, p intstr.IntOrString) bool {
	for _, w := range ws {
		for _, ct := range w.spec.Containers {
			for _, cp := range ct.Ports {
				if (p.Type == intstr.String && cp.Name == p.StrVal) || (p.Type == intstr.Int && cp.ContainerPort == p.IntVal) {
					return true
				}
			}
		}
	}
	return false
}
