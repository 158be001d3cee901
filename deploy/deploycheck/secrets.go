package deploycheck

import (
	"fmt"
	"net/url"
	"path"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
)

// RoleRouter is the router's role label: the only pods that may be public.
const RoleRouter = "router"

// secretEnv are the settings a binary reads from its environment only (it has no *_FILE
// form), so they come from a Secret by secretKeyRef. Every other secret is a file.
var secretEnv = map[string]string{
	"ROUTER_UNKNOWN_HASH_KEY": "router/cmd/router reads it from the environment only",
}

var (
	secretName = regexp.MustCompile(`(?i)(PASSWORD|PASSWD|SECRET|TOKEN|CREDENTIAL|PRIVATE|(^|_)KEY$|(^|_)KEYS$)`)
	// notSecret are names that match secretName but hold no secret.
	notSecret     = regexp.MustCompile(`(?i)(_FILE|_DIR|_PATH|PUBLIC_KEYS?)$`)
	passwordParam = regexp.MustCompile(`(?i)[?&](password|sslpassword)=`)
)

// secretValue returns why a value looks like a secret, or "".
func secretValue(v string) string {
	if strings.Contains(v, "-----BEGIN") {
		return "holds a PEM block"
	}
	if strings.Contains(v, "://") {
		if u, err := url.Parse(strings.TrimSpace(v)); err == nil && u.User != nil {
			if _, ok := u.User.Password(); ok {
				return "is a URL with a password"
			}
		}
		if passwordParam.MatchString(v) {
			return "is a URL with a password parameter"
		}
	}
	return ""
}

func secretLooking(name string) bool {
	return secretName.MatchString(name) && !notSecret.MatchString(name)
}

func (c *cluster) checkSecrets() []Finding {
	var out []Finding
	add := func(rule string, o *Object, format string, args ...any) {
		out = append(out, Finding{Rule: rule, Overlay: o.Overlay, Object: o.Ref(), Message: fmt.Sprintf(format, args...)})
	}
	for _, o := range c.objs {
		switch t := o.Typed.(type) {
		case *corev1.Secret:
			add(RuleSecret, o, "Secrets are created by the operator in the cluster, never kept with the manifests")
		case *corev1.ConfigMap:
			for _, k := range sortedKeys(t.Data) {
				if secretLooking(k) {
					add(RuleSecret, o, "key %s looks like a secret: ConfigMaps are not secret; mount a Secret as a file", k)
				}
				if why := secretValue(t.Data[k]); why != "" {
					add(RuleSecret, o, "key %s %s", k, why)
				}
			}
		}
	}
	for _, w := range c.workloads {
		for _, ct := range containers(w.spec) {
			mounts := ct.VolumeMounts
			for _, e := range c.env(w, ct) {
				where := fmt.Sprintf("container %s: %s", ct.Name, e.name)
				switch {
				case e.secretRef:
					if _, ok := secretEnv[e.name]; !ok {
						add(RuleSecret, w.obj, "%s comes from a Secret as an environment variable: mount the Secret as a file and use the *_FILE setting", where)
					}
				case e.inline && secretLooking(e.name):
					add(RuleSecret, w.obj, "%s looks like a secret and is written inline", where)
				}
				if why := secretValue(e.value); why != "" {
					add(RuleSecret, w.obj, "%s %s", where, why)
				}
				if fileSetting(e.name, e.value) && !underMount(e.value, mounts) {
					add(RuleConfig, w.obj, "%s names %s, which is in no volume the container mounts", where, e.value)
				}
			}
		}
	}
	return out
}

// fileSetting reports whether a setting names a file the container must have.
func fileSetting(name, value string) bool {
	if !strings.HasPrefix(value, "/") {
		return false
	}
	return strings.HasSuffix(name, "_FILE") || name == "RENDER_PROFILE_MANIFEST" || name == "RENDER_WORKERS_CONFIG"
}

func underMount(p string, mounts []corev1.VolumeMount) bool {
	p = path.Clean(p)
	for _, m := range mounts {
		mp := path.Clean(m.MountPath)
		if strings.HasPrefix(p, mp+"/") {
			return true
		}
	}
	return false
}

// envVar is one resolved environment variable of a container.
type envVar struct {
	name, value string
	// inline: written in the manifest (env value or a ConfigMap); secretRef: from a Secret.
	inline, secretRef bool
}

// env resolves a container's environment as the kubelet would build it: envFrom ConfigMaps
// first, then env in order, with $(VAR) references expanded (POD_NAME-style field references
// stay as $(NAME) placeholders unless set with podName).
func (c *cluster) env(w *workload, ct *corev1.Container) []envVar {
	return c.envFor(w, ct, "")
}

func (c *cluster) envFor(w *workload, ct *corev1.Container, podName string) []envVar {
	var out []envVar
	vals := map[string]string{}
	set := func(e envVar) {
		for i := range out {
			if out[i].name == e.name {
				out[i] = e
				vals[e.name] = e.value
				return
			}
		}
		out = append(out, e)
		vals[e.name] = e.value
	}
	for _, ef := range ct.EnvFrom {
		if ef.ConfigMapRef != nil {
			if cm := c.configMap(w.namespace, ef.ConfigMapRef.Name); cm != nil {
				for _, k := range sortedKeys(cm.Data) {
					set(envVar{name: ef.Prefix + k, value: cm.Data[k], inline: true})
				}
			}
		}
		if ef.SecretRef != nil {
			// Names unknown without the Secret: every one of them is a secret env var.
			set(envVar{name: "(envFrom Secret " + ef.SecretRef.Name + ")", secretRef: true})
		}
	}
	for _, e := range ct.Env {
		switch {
		case e.ValueFrom == nil:
			set(envVar{name: e.Name, value: expand(e.Value, vals), inline: true})
		case e.ValueFrom.SecretKeyRef != nil:
			set(envVar{name: e.Name, secretRef: true})
		case e.ValueFrom.ConfigMapKeyRef != nil:
			v := ""
			if cm := c.configMap(w.namespace, e.ValueFrom.ConfigMapKeyRef.Name); cm != nil {
				v = cm.Data[e.ValueFrom.ConfigMapKeyRef.Key]
			}
			set(envVar{name: e.Name, value: v, inline: true})
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name" && podName != "":
			set(envVar{name: e.Name, value: podName})
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace":
			set(envVar{name: e.Name, value: w.namespace})
		default:
			set(envVar{name: e.Name, value: "$(" + e.Name + ")"})
		}
	}
	return out
}

var varRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)`)

// expand replaces $(NAME) with earlier variables' values, as Kubernetes does.
func expand(s string, vals map[string]string) string {
	return varRef.ReplaceAllStringFunc(s, func(m string) string {
		if v, ok := vals[m[2:len(m)-1]]; ok {
			return v
		}
		return m
	})
}

func envValue(env []envVar, name string) (string, bool) {
	for _, e := range env {
		if e.name == name {
			return e.value, true
		}
	}
	return "", false
}

// checkPublic: only the router is reachable from outside the cluster by a Service or Ingress
// (the NetworkPolicies are checked by checkFlows).
func (c *cluster) checkPublic() []Finding {
	var out []Finding
	for _, ns := range sortedKeys(c.services) {
		for _, s := range c.services[ns] {
			public := s.Spec.Type == corev1.ServiceTypeLoadBalancer || s.Spec.Type == corev1.ServiceTypeNodePort || len(s.Spec.ExternalIPs) > 0
			if !public {
				continue
			}
			for _, w := range c.serviceWorkloads(s) {
				if w.role() != RoleRouter {
					o := c.objectOf(s)
					out = append(out, Finding{Rule: RulePublic, Overlay: o.Overlay, Object: o.Ref(),
						Message: fmt.Sprintf("type %s exposes %s (role %q) outside the cluster: only the router is public", s.Spec.Type, w.obj.Ref(), w.role())})
				}
			}
		}
	}
	for _, o := range c.objs {
		ing, ok := o.Typed.(*networkingv1.Ingress)
		if !ok {
			continue
		}
		var backends []*networkingv1.IngressServiceBackend
		if ing.Spec.DefaultBackend != nil {
			backends = append(backends, ing.Spec.DefaultBackend.Service)
		}
		for _, r := range ing.Spec.Rules {
			if r.HTTP != nil {
				for _, p := range r.HTTP.Paths {
					backends = append(backends, p.Backend.Service)
				}
			}
		}
		for _, b := range backends {
			if b == nil {
				out = append(out, Finding{Rule: RulePublic, Overlay: o.Overlay, Object: o.Ref(), Message: "a backend that is not a Service"})
				continue
			}
			s := c.service(ing.Namespace, b.Name)
			if s == nil {
				out = append(out, Finding{Rule: RuleReference, Overlay: o.Overlay, Object: o.Ref(), Message: "backend Service " + b.Name + " is not rendered"})
				continue
			}
			for _, w := range c.serviceWorkloads(s) {
				if w.role() != RoleRouter {
					out = append(out, Finding{Rule: RulePublic, Overlay: o.Overlay, Object: o.Ref(),
						Message: fmt.Sprintf("exposes %s (role %q): only the router is public", w.obj.Ref(), w.role())})
				}
			}
		}
	}
	return out
}
