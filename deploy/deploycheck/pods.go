package deploycheck

import (
	"fmt"
	"regexp"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// RoleRenderer is the renderer's role label: the one pod allowed the exceptions below.
const RoleRenderer = "renderer"

// rendererCapabilities are the capabilities the renderer's control process needs inside its
// user namespace, and why (see base/cell/renderer.yaml):
var rendererCapabilities = map[corev1.Capability]string{
	"SYS_ADMIN":    "new PID, network, mount and IPC namespaces per attempt, setns, the file view's mounts",
	"NET_ADMIN":    "bringing up lo in each attempt's network namespace",
	"SETUID":       "switching to the attempt's user",
	"SETGID":       "switching to the attempt's group",
	"KILL":         "killing the attempt's processes, which belong to another user",
	"CHOWN":        "handing the attempt directory to the attempt's user",
	"DAC_OVERRIDE": "removing the attempt's leftovers and cgroups across owners",
	"FOWNER":       "removing the attempt's leftovers and cgroups across owners",
}

// rendererSecrets are the only Secrets a renderer pod may mount: its service credential and
// the TLS key of its control API. Never a database, signing or blob credential.
var rendererSecrets = map[string]bool{
	"renderer-service-credential": true,
	"renderer-tls":                true,
}

// resourcesRequired are the resources every container must request and limit.
var resourcesRequired = []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage}

func (c *cluster) checkPods(stages map[string]bool) []Finding {
	var out []Finding
	for _, w := range c.workloads {
		add := func(rule, format string, args ...any) {
			out = append(out, Finding{Rule: rule, Overlay: w.obj.Overlay, Object: w.obj.Ref(), Message: fmt.Sprintf(format, args...)})
		}
		renderer := w.role() == RoleRenderer
		if w.role() == "" {
			add(RuleLabels, "the pod template has no %s label: the network rules cannot tell what it is", LabelRole)
		}
		spec := w.spec
		if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
			add(RulePodSecurity, "automountServiceAccountToken must be false: no pod of the deployment talks to the Kubernetes API")
		}
		if spec.HostNetwork || spec.HostPID || spec.HostIPC {
			add(RulePodSecurity, "uses the node's network, PID or IPC namespace")
		}
		if spec.ShareProcessNamespace != nil && *spec.ShareProcessNamespace {
			add(RulePodSecurity, "shareProcessNamespace lets containers see each other's processes")
		}
		for _, v := range spec.Volumes {
			if v.HostPath != nil {
				add(RulePodSecurity, "volume %s is a hostPath", v.Name)
			}
			if v.Secret != nil && renderer && !rendererSecrets[v.Secret.SecretName] {
				add(RuleRenderer, "mounts Secret %s: a renderer holds its service credential only (and its TLS key), never a database, signing or storage secret", v.Secret.SecretName)
			}
			if v.Projected != nil && renderer {
				add(RuleRenderer, "volume %s is projected: a renderer holds its service credential only", v.Name)
			}
		}
		if renderer {
			if spec.HostUsers == nil || *spec.HostUsers {
				add(RuleRenderer, "hostUsers must be false: the renderer runs as root, which must be root of its own user namespace, not of the node")
			}
			if len(spec.Containers) != 1 || len(spec.InitContainers) != 0 || len(spec.EphemeralContainers) != 0 {
				add(RuleRenderer, "a renderer pod runs the renderer alone: any other container would share its network namespace, its egress and its limits")
			}
			if spec.RuntimeClassName == nil || *spec.RuntimeClassName == "" {
				add(RuleRenderer, "runtimeClassName is required: the renderer's nodes must give it a writable, delegated cgroup")
			}
		}
		for _, ct := range containers(spec) {
			out = append(out, checkContainer(w, ct, renderer, stages)...)
		}
	}
	return out
}

func checkContainer(w *workload, ct *corev1.Container, renderer bool, stages map[string]bool) []Finding {
	var out []Finding
	add := func(rule, format string, args ...any) {
		out = append(out, Finding{Rule: rule, Overlay: w.obj.Overlay, Object: w.obj.Ref(),
			Message: "container " + ct.Name + ": " + fmt.Sprintf(format, args...)})
	}
	pod := w.spec.SecurityContext
	if pod == nil {
		pod = &corev1.PodSecurityContext{}
	}
	sc := ct.SecurityContext
	if sc == nil {
		sc = &corev1.SecurityContext{}
	}

	// Resources.
	for _, r := range resourcesRequired {
		req, hasReq := ct.Resources.Requests[r]
		lim, hasLim := ct.Resources.Limits[r]
		if !hasLim {
			add(RuleLimits, "no %s limit", r)
		}
		if !hasReq {
			add(RuleLimits, "no %s request", r)
		}
		if hasReq && hasLim && req.Cmp(lim) > 0 {
			add(RuleLimits, "%s request %s exceeds its limit %s", r, req.String(), lim.String())
		}
	}

	// Image.
	if msg := checkImage(ct.Image, stages); msg != "" {
		add(RuleImage, "%s", msg)
	}

	// Security context for every container.
	for _, p := range ct.Ports {
		if p.HostPort != 0 || p.HostIP != "" {
			add(RulePodSecurity, "port %d is bound on the node (hostPort)", p.ContainerPort)
		}
	}
	if sc.Privileged != nil && *sc.Privileged {
		add(ruleFor(renderer), "privileged: the node's devices and every capability; nothing here needs it")
	}
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		add(ruleFor(renderer), "readOnlyRootFilesystem must be true (writable places are emptyDir volumes)")
	}
	var caps corev1.Capabilities
	if sc.Capabilities != nil {
		caps = *sc.Capabilities
	}
	if !hasCap(caps.Drop, "ALL") {
		add(ruleFor(renderer), "capabilities.drop must include ALL")
	}
	seccomp := sc.SeccompProfile
	if seccomp == nil {
		seccomp = pod.SeccompProfile
	}
	if seccomp == nil || (seccomp.Type != corev1.SeccompProfileTypeRuntimeDefault && seccomp.Type != corev1.SeccompProfileTypeLocalhost) {
		add(ruleFor(renderer), "seccompProfile must be RuntimeDefault or Localhost (not unset, not Unconfined)")
	}
	apparmor := sc.AppArmorProfile
	if apparmor == nil {
		apparmor = pod.AppArmorProfile
	}
	// Kubernetes' own validation refuses this pair when the capability is spelled
	// CAP_SYS_ADMIN; spelled SYS_ADMIN it is the same contradiction (no_new_privs does not bind
	// a process that holds CAP_SYS_ADMIN), so it is refused here in both spellings.
	if sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation && hasCap(caps.Add, "SYS_ADMIN") {
		add(RuleDecode, "allowPrivilegeEscalation: false with CAP_SYS_ADMIN: the API server refuses the pair (no_new_privs does not bind a process holding CAP_SYS_ADMIN)")
	}
	if sc.ProcMount != nil && *sc.ProcMount == corev1.UnmaskedProcMount && (w.spec.HostUsers == nil || *w.spec.HostUsers) {
		add(RuleDecode, "procMount: Unmasked needs hostUsers: false (refused by the API server otherwise)")
	}

	runAsUser := sc.RunAsUser
	if runAsUser == nil {
		runAsUser = pod.RunAsUser
	}
	runAsNonRoot := sc.RunAsNonRoot
	if runAsNonRoot == nil {
		runAsNonRoot = pod.RunAsNonRoot
	}
	if !renderer {
		if runAsNonRoot == nil || !*runAsNonRoot {
			add(RulePodSecurity, "runAsNonRoot must be true")
		}
		if runAsUser != nil && *runAsUser == 0 {
			add(RulePodSecurity, "runs as root (runAsUser 0)")
		}
		if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			add(RulePodSecurity, "allowPrivilegeEscalation must be false")
		}
		if len(caps.Add) > 0 {
			add(RulePodSecurity, "adds capabilities %v", caps.Add)
		}
		if sc.ProcMount != nil && *sc.ProcMount != corev1.DefaultProcMount {
			add(RulePodSecurity, "procMount %s: only the renderer may unmask /proc", *sc.ProcMount)
		}
		if apparmor != nil && apparmor.Type == corev1.AppArmorProfileTypeUnconfined {
			add(RulePodSecurity, "AppArmor Unconfined: only the renderer needs mounts")
		}
		return out
	}

	// The renderer: root, but only in its own user namespace (checked on the pod), with the
	// capabilities its isolation needs and nothing more.
	if runAsUser != nil && *runAsUser == 0 && (w.spec.HostUsers == nil || *w.spec.HostUsers) {
		add(RuleRenderer, "runs as root of the node: root is allowed only with hostUsers: false")
	}
	var extra []string
	for _, cp := range caps.Add {
		name := corev1.Capability(strings.TrimPrefix(string(cp), "CAP_"))
		if _, ok := rendererCapabilities[name]; !ok {
			extra = append(extra, string(cp))
		}
	}
	if len(extra) > 0 {
		sort.Strings(extra)
		add(RuleRenderer, "adds capabilities %v that the renderer's isolation does not need (allowed: %s)", extra, strings.Join(sortedKeys(rendererCapabilities), ", "))
	}
	for _, a := range append(append([]string{}, ct.Command...), ct.Args...) {
		if noSandbox.MatchString(a) {
			add(RuleRenderer, "%q switches off Chromium's sandbox", a)
		}
	}
	for _, e := range ct.Env {
		if strings.Contains(strings.ToUpper(e.Name), "NO_SANDBOX") || noSandbox.MatchString(e.Value) {
			add(RuleRenderer, "%s switches off Chromium's sandbox", e.Name)
		}
	}
	return out
}

var noSandbox = regexp.MustCompile(`(?i)no-?sandbox|disable-setuid-sandbox|no-zygote-sandbox`)

func ruleFor(renderer bool) string {
	if renderer {
		return RuleRenderer
	}
	return RulePodSecurity
}

func hasCap(list []corev1.Capability, name string) bool {
	for _, c := range list {
		if strings.EqualFold(strings.TrimPrefix(string(c), "CAP_"), name) {
			return true
		}
	}
	return false
}
