package deploycheck

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	rc "slidecells/shared/rendercontract"
)

// Settings of the renderer that bound one attempt; each must be set explicitly, so the pod's
// limits are sized against known numbers.
const (
	envChildMemory    = "RENDER_CHILD_MEMORY_MB"
	envChildProcesses = "RENDER_CHILD_MAX_PROCESSES"
	envChildCPUs      = "RENDER_CHILD_CPUS"
	envChildTempDisk  = "RENDER_CHILD_TEMP_DISK_MB"
	// controlHeadroomMiB is what the renderer's control process needs beside one attempt.
	controlHeadroomMiB = 256
	// maxTempRoot is the renderer's limit on RENDER_TEMP_ROOT (Chromium's socket paths).
	maxTempRoot = 40
)

var workerIDRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// checkConfig: settings of the cell, its renderers and its preview host that must agree.
func (c *cluster) checkConfig() []Finding {
	var out []Finding
	add := func(w *workload, format string, args ...any) {
		out = append(out, Finding{Rule: RuleConfig, Overlay: w.obj.Overlay, Object: w.obj.Ref(), Message: fmt.Sprintf(format, args...)})
	}
	addR := func(w *workload, format string, args ...any) {
		out = append(out, Finding{Rule: RuleRenderer, Overlay: w.obj.Overlay, Object: w.obj.Ref(), Message: fmt.Sprintf(format, args...)})
	}
	for _, ns := range sortedKeys(c.namespaces) {
		cells := c.workloadsOf(ns, "cell")
		renderers := c.workloadsOf(ns, RoleRenderer)
		previews := c.workloadsOf(ns, "preview")
		for _, r := range renderers {
			ct := &r.spec.Containers[0]
			env := c.env(r, ct)
			c.checkChildLimits(r, ct, env, addR)
			c.checkProfile(r, ct, env, add)
			if r.obj.Kind != "StatefulSet" {
				add(r, "renderers run as a StatefulSet: the cell addresses each one by its stable name")
			}
			if len(cells) == 0 {
				add(r, "no cell backend in %s uses these renderers", ns)
			}
		}
		for _, cw := range cells {
			ct := &cw.spec.Containers[0]
			env := c.env(cw, ct)
			c.checkProfile(cw, ct, env, add)
			if len(renderers) == 0 {
				continue
			}
			nav, _ := envValue(env, "RENDER_RUNTIME_NAVIGATION_BASE_URL")
			c.checkPreviewURL(cw, "RENDER_RUNTIME_NAVIGATION_BASE_URL", nav, previews, add)
			c.checkWorkers(cw, ct, env, renderers, add)
			cellCA := c.secretOfFile(cw, ct, env, "RENDER_WORKERS_CA_FILE")
			if cellCA == "" {
				add(cw, "RENDER_WORKERS_CA_FILE is not a file of a Secret: the cell must trust its private CA (only it) for the renderers' TLS")
			}
			cellCred := c.secretOfFile(cw, ct, env, "RENDER_SERVICE_CREDENTIAL_FILE")
			for _, r := range renderers {
				rct := &r.spec.Containers[0]
				renv := c.env(r, rct)
				base, _ := envValue(renv, "RENDER_PREVIEW_BASE_URL")
				if strings.TrimSuffix(base, "/") != strings.TrimSuffix(nav, "/") {
					add(r, "RENDER_PREVIEW_BASE_URL %q differs from the cell's RENDER_RUNTIME_NAVIGATION_BASE_URL %q: preview access is bound to the navigation origin", base, nav)
				}
				c.checkTLSServer(r, rct, renv, "RENDER_TLS_CERT_FILE", "RENDER_TLS_KEY_FILE", "control", add)
				if rc := c.secretOfFile(r, rct, renv, "RENDER_SERVICE_CREDENTIAL_FILE"); rc != cellCred || rc == "" {
					add(r, "RENDER_SERVICE_CREDENTIAL_FILE comes from Secret %q, the cell's from %q: they must be the same credential", rc, cellCred)
				}
			}
			for _, p := range previews {
				pct := &p.spec.Containers[0]
				penv := c.env(p, pct)
				if a, b := c.secretOfFile(p, pct, penv, "PREVIEW_SERVICE_CREDENTIAL_FILE"), c.secretOfFile(cw, ct, env, "PREVIEW_SERVICE_CREDENTIAL_FILE"); a != b || a == "" {
					add(p, "PREVIEW_SERVICE_CREDENTIAL_FILE comes from Secret %q, the cell's from %q: they must be the same credential", a, b)
				}
				backend, _ := envValue(penv, "PREVIEW_BACKEND_URL")
				if msg := c.urlServes(ns, backend, "cell"); msg != "" {
					add(p, "PREVIEW_BACKEND_URL %s", msg)
				}
				if !strings.HasPrefix(backend, "https://") {
					add(p, "PREVIEW_BACKEND_URL %q is not https: the preview service credential would cross nodes in clear (use the cell's CELL_INTERNAL_TLS_LISTEN_ADDR)", backend)
				} else {
					if c.secretOfFile(p, pct, penv, "PREVIEW_BACKEND_CA_FILE") == "" {
						add(p, "PREVIEW_BACKEND_CA_FILE is not a file of a Secret: the preview host must trust the cell's private CA (only it) for its pulls")
					}
					if _, ok := envValue(env, "CELL_INTERNAL_TLS_LISTEN_ADDR"); !ok {
						add(cw, "CELL_INTERNAL_TLS_LISTEN_ADDR is not set, but the preview host pulls over https")
					} else {
						c.checkTLSServer(cw, ct, env, "CELL_TLS_CERT_FILE", "CELL_TLS_KEY_FILE", "", add)
					}
				}
			}
		}
	}
	return out
}

// checkTLSServer: a listener other pods reach serves TLS: its certificate and key are files of
// a Secret, and the kubelet's HTTP probes on probePort (when named) use HTTPS.
func (c *cluster) checkTLSServer(w *workload, ct *corev1.Container, env []envVar, certSetting, keySetting, probePort string, add func(*workload, string, ...any)) {
	for _, s := range []string{certSetting, keySetting} {
		if c.secretOfFile(w, ct, env, s) == "" {
			add(w, "%s is not a file of a Secret: the listener other pods reach must serve TLS with a certificate of the cell's private CA", s)
		}
	}
	if probePort == "" {
		return
	}
	for _, p := range []*corev1.Probe{ct.StartupProbe, ct.LivenessProbe, ct.ReadinessProbe} {
		if p != nil && p.HTTPGet != nil && p.HTTPGet.Port.String() == probePort && p.HTTPGet.Scheme != corev1.URISchemeHTTPS {
			add(w, "an HTTP probe of port %s is not scheme HTTPS: the listener speaks TLS only", probePort)
		}
	}
}

// checkChildLimits: one attempt's cgroup limits are set and fit in the container's.
func (c *cluster) checkChildLimits(w *workload, ct *corev1.Container, env []envVar, add func(*workload, string, ...any)) {
	num := func(name string) (float64, bool) {
		v, ok := envValue(env, name)
		if !ok {
			add(w, "%s is not set: every attempt bound is set explicitly so the pod's limits fit it", name)
			return 0, false
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f <= 0 {
			add(w, "%s %q is not a positive number", name, v)
			return 0, false
		}
		return f, true
	}
	mem, okMem := num(envChildMemory)
	_, _ = num(envChildProcesses)
	cpus, okCPU := num(envChildCPUs)
	disk, okDisk := num(envChildTempDisk)
	if lim, ok := ct.Resources.Limits[corev1.ResourceMemory]; ok && okMem {
		limMiB := float64(lim.Value()) / (1 << 20)
		if mem+controlHeadroomMiB > limMiB {
			add(w, "%s %.0f plus %d MiB for the control process exceeds the memory limit %s: the pod would be OOM-killed before the attempt's own limit applies", envChildMemory, mem, controlHeadroomMiB, lim.String())
		}
	}
	if lim, ok := ct.Resources.Limits[corev1.ResourceCPU]; ok && okCPU {
		if cpus > float64(lim.MilliValue())/1000 {
			add(w, "%s %g exceeds the CPU limit %s", envChildCPUs, cpus, lim.String())
		}
	}
	if okDisk && okMem && disk > mem {
		add(w, "%s %.0f exceeds %s %.0f: the attempt's tmpfs is charged to its memory", envChildTempDisk, disk, envChildMemory, mem)
	}
	if root, ok := envValue(env, "RENDER_TEMP_ROOT"); ok {
		if len(root) > maxTempRoot {
			add(w, "RENDER_TEMP_ROOT %q is longer than %d characters", root, maxTempRoot)
		}
		if v := c.volumeAt(w, ct, root); v == nil || v.EmptyDir == nil {
			add(w, "RENDER_TEMP_ROOT %q is not on an emptyDir volume (the root file system is read-only)", root)
		}
	} else {
		add(w, "RENDER_TEMP_ROOT is not set: its default /tmp/renderer must be on an emptyDir; set it explicitly")
	}
	if d, ok := envValue(env, "RENDER_CHILD_UID_LOCK_DIR"); !ok {
		add(w, "RENDER_CHILD_UID_LOCK_DIR is not set: its default is on the read-only root file system")
	} else if v := c.volumeAt(w, ct, d); v == nil || v.EmptyDir == nil {
		add(w, "RENDER_CHILD_UID_LOCK_DIR %q is not on an emptyDir volume", d)
	}
}

// checkProfile: the render profile the release pins is a RenderProfile of this contract.
func (c *cluster) checkProfile(w *workload, ct *corev1.Container, env []envVar, add func(*workload, string, ...any)) {
	p, ok := envValue(env, "RENDER_PROFILE_MANIFEST")
	if !ok {
		if w.role() == RoleRenderer {
			add(w, "RENDER_PROFILE_MANIFEST is not set: renderers check themselves against the release's profile")
		}
		return
	}
	data, err := c.fileFromConfigMap(w, ct, p)
	if err != nil {
		add(w, "RENDER_PROFILE_MANIFEST: %v", err)
		return
	}
	var prof rc.RenderProfile
	dec := json.NewDecoder(bytes.NewReader([]byte(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&prof); err != nil {
		add(w, "RENDER_PROFILE_MANIFEST %s is not a render profile: %v", p, err)
		return
	}
	want := map[string][2]string{
		"contract_version":   {prof.ContractVersion, rc.ContractVersion},
		"readiness_protocol": {prof.ReadinessProtocol, rc.ReadinessProtocol},
		"result_schema":      {prof.ResultSchema, rc.ResultSchemaVersion},
		"diagnosis_schema":   {prof.DiagnosisSchema, rc.DiagnosisSchemaVersion},
	}
	for _, k := range sortedKeys(want) {
		if want[k][0] != want[k][1] {
			add(w, "RENDER_PROFILE_MANIFEST declares %s %q; this release speaks %q (regenerate it with `renderer profile`)", k, want[k][0], want[k][1])
		}
	}
}

// checkWorkers: the cell's RENDER_WORKERS_CONFIG lists exactly its renderer pods, each by the
// worker ID the pod gives itself and the address its stable name has.
func (c *cluster) checkWorkers(cw *workload, ct *corev1.Container, env []envVar, renderers []*workload, add func(*workload, string, ...any)) {
	raw, ok := envValue(env, "RENDER_WORKERS_CONFIG")
	if !ok {
		add(cw, "RENDER_WORKERS_CONFIG is not set, but %d renderer workload(s) run in %s", len(renderers), cw.namespace)
		return
	}
	if !strings.HasPrefix(strings.TrimSpace(raw), "[") {
		data, err := c.fileFromConfigMap(cw, ct, raw)
		if err != nil {
			add(cw, "RENDER_WORKERS_CONFIG: %v", err)
			return
		}
		raw = data
	}
	var list []struct {
		WorkerID string `json:"worker_id"`
		URL      string `json:"url"`
	}
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&list); err != nil {
		add(cw, "RENDER_WORKERS_CONFIG is not a JSON array of {worker_id, url}: %v", err)
		return
	}
	have := map[string]string{}
	for _, e := range list {
		if _, dup := have[e.WorkerID]; dup {
			add(cw, "RENDER_WORKERS_CONFIG lists worker %s twice", e.WorkerID)
		}
		have[e.WorkerID] = e.URL
	}
	want := map[string]string{}
	for _, r := range renderers {
		rct := &r.spec.Containers[0]
		for i := 0; i < r.replicas; i++ {
			pod := fmt.Sprintf("%s-%d", r.name, i)
			renv := c.envFor(r, rct, pod)
			id, _ := envValue(renv, "RENDER_WORKER_ID")
			if !workerIDRE.MatchString(id) {
				add(r, "pod %s: RENDER_WORKER_ID %q is not a worker ID (letters, digits, '_', '-')", pod, id)
				continue
			}
			addr, _ := envValue(renv, "RENDER_LISTEN_ADDR")
			_, port, err := net.SplitHostPort(addr)
			if err != nil || port == "0" {
				add(r, "RENDER_LISTEN_ADDR %q has no fixed port the cell can name", addr)
				continue
			}
			if !containerHasPort(rct, port) {
				add(r, "RENDER_LISTEN_ADDR port %s is not a declared container port", port)
			}
			want[id] = "https://" + pod + "." + r.serviceName + ":" + port
		}
	}
	for _, id := range sortedKeys(have) {
		if !strings.HasPrefix(have[id], "https://") {
			add(cw, "RENDER_WORKERS_CONFIG gives renderer %s the address %s: across pods the control API is https only (its service credential would cross nodes in clear)", id, have[id])
		}
	}
	for _, id := range sortedKeys(want) {
		got, ok := have[id]
		switch {
		case !ok:
			add(cw, "RENDER_WORKERS_CONFIG does not list renderer %s (%s): the cell would never use it", id, want[id])
		case strings.TrimSuffix(got, "/") != want[id]:
			add(cw, "RENDER_WORKERS_CONFIG gives renderer %s the address %s; its pod is at %s", id, got, want[id])
		}
	}
	var extra []string
	for id := range have {
		if _, ok := want[id]; !ok {
			extra = append(extra, id)
		}
	}
	sort.Strings(extra)
	for _, id := range extra {
		add(cw, "RENDER_WORKERS_CONFIG lists worker %s, which no renderer pod is", id)
	}
}

// checkPreviewURL: the URL names the namespace's preview Service on one of its ports.
func (c *cluster) checkPreviewURL(w *workload, name, v string, previews []*workload, add func(*workload, string, ...any)) {
	if v == "" {
		add(w, "%s is not set", name)
		return
	}
	if len(previews) == 0 {
		add(w, "%s is set but no preview host runs in %s", name, w.namespace)
		return
	}
	if msg := c.urlServes(w.namespace, v, "preview"); msg != "" {
		add(w, "%s %s", name, msg)
	}
}

// urlServes returns why the http URL u does not reach a Service of namespace ns selecting
// pods of the role, or "".
func (c *cluster) urlServes(ns, u, role string) string {
	pu, err := url.Parse(u)
	if err != nil || pu.Scheme != "http" && pu.Scheme != "https" || pu.Host == "" {
		return fmt.Sprintf("%q is not an http(s) URL", u)
	}
	host, port := pu.Hostname(), pu.Port()
	svcName, svcNS, _ := strings.Cut(host, ".")
	if svcNS != "" {
		svcNS, _, _ = strings.Cut(svcNS, ".")
	} else {
		svcNS = ns
	}
	s := c.service(svcNS, svcName)
	if s == nil {
		return fmt.Sprintf("%q names Service %s/%s, which is not rendered", u, svcNS, svcName)
	}
	ok := false
	for _, w := range c.serviceWorkloads(s) {
		ok = ok || w.role() == role
	}
	if !ok {
		return fmt.Sprintf("%q names Service %s, which selects no %s pods", u, svcName, role)
	}
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[pu.Scheme]
	}
	for _, p := range s.Spec.Ports {
		if strconv.Itoa(int(p.Port)) == port {
			return ""
		}
	}
	return fmt.Sprintf("%q uses port %s, which Service %s does not have", u, port, svcName)
}

func containerHasPort(ct *corev1.Container, port string) bool {
	for _, p := range ct.Ports {
		if strconv.Itoa(int(p.ContainerPort)) == port {
			return true
		}
	}
	return false
}

// volumeAt returns the volume mounted at or above the path p in the container.
func (c *cluster) volumeAt(w *workload, ct *corev1.Container, p string) *corev1.Volume {
	p = path.Clean(p)
	var best *corev1.VolumeMount
	for i := range ct.VolumeMounts {
		m := &ct.VolumeMounts[i]
		mp := path.Clean(m.MountPath)
		if (p == mp || strings.HasPrefix(p, mp+"/")) && (best == nil || len(mp) > len(path.Clean(best.MountPath))) {
			best = m
		}
	}
	if best == nil {
		return nil
	}
	for i := range w.spec.Volumes {
		if w.spec.Volumes[i].Name == best.Name {
			return &w.spec.Volumes[i]
		}
	}
	return nil
}

// fileFromConfigMap returns the content of the file p as the container sees it, when a
// ConfigMap volume provides it.
func (c *cluster) fileFromConfigMap(w *workload, ct *corev1.Container, p string) (string, error) {
	v := c.volumeAt(w, ct, p)
	if v == nil || v.ConfigMap == nil {
		return "", fmt.Errorf("%s is not in a ConfigMap volume of the container", p)
	}
	var mountPath string
	for _, m := range ct.VolumeMounts {
		if m.Name == v.Name {
			mountPath = path.Clean(m.MountPath)
		}
	}
	rel := strings.TrimPrefix(path.Clean(p), mountPath+"/")
	key := rel
	if len(v.ConfigMap.Items) > 0 {
		key = ""
		for _, it := range v.ConfigMap.Items {
			if path.Clean(it.Path) == rel {
				key = it.Key
			}
		}
	}
	cm := c.configMap(w.namespace, v.ConfigMap.Name)
	if cm == nil {
		return "", fmt.Errorf("ConfigMap %s is not rendered", v.ConfigMap.Name)
	}
	data, ok := cm.Data[key]
	if !ok || key == "" {
		return "", fmt.Errorf("ConfigMap %s has no key for %s", v.ConfigMap.Name, p)
	}
	return data, nil
}

// secretOfFile returns the Secret the file named by setting comes from, or "".
func (c *cluster) secretOfFile(w *workload, ct *corev1.Container, env []envVar, setting string) string {
	p, ok := envValue(env, setting)
	if !ok {
		return ""
	}
	if v := c.volumeAt(w, ct, p); v != nil && v.Secret != nil {
		return v.Secret.SecretName
	}
	return ""
}
