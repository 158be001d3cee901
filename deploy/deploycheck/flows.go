package deploycheck

import (
	"fmt"
	"net/netip"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// flowRule is one line of the flow table: traffic from class From to class To is allowed
// (Same: only within one namespace, that is one cell). Classes are <tier>/<role> for the
// deployment's pods (edge/router, cell/renderer, …) or the name of an outside endpoint;
// "*" is any class.
type flowRule struct {
	From, To string
	Same     bool
	// Required: the deployment does not work without it, so the policies must allow it.
	Required bool
	// Ports, when set, are the only named container ports of To the flow may reach; any other
	// port the policies open between the two is a finding.
	Ports []string
	Why   string
}

// flowTable is every flow the NetworkPolicies may allow. Anything else they allow is a
// finding, and so is a required flow they block.
var flowTable = []flowRule{
	{From: "internet", To: "edge/router", Required: true, Why: "the public entry"},
	{From: "*", To: "edge/router", Why: "the router is public: any source may reach it"},
	{From: "edge/router", To: "cell/cell", Required: true, Why: "proxying the API to each cell"},
	{From: "edge/router", To: "cell/preview", Required: true, Why: "the public preview path /preview/w/{ws}/…"},
	{From: "edge/router", To: "edge/database", Same: true, Required: true, Why: "placements and cells"},
	{From: "edge/cellctl", To: "edge/database", Same: true, Required: true, Why: "the operator's CLI"},
	{From: "cell/cell", To: "edge/database", Required: true, Why: "tokens, memberships, placements"},
	{From: "cell/cell", To: "cell/database", Same: true, Required: true, Why: "the cell's own database"},
	{From: "cell/cell", To: "cell/renderer", Same: true, Required: true, Why: "the render coordinator dispatching to its renderers"},
	{From: "cell/cell", To: "internet", Required: true, Why: "the blob store (S3-compatible)"},
	{From: "cell/preview", To: "cell/cell", Same: true, Required: true, Why: "snapshots and the key set"},
	{From: "cell/renderer", To: "cell/preview", Same: true, Required: true, Why: "preview documents and their assets"},
	{From: "cell/database", To: "cell/database", Same: true, Required: true, Why: "CockroachDB peers"},
	{From: "edge/database", To: "edge/database", Same: true, Required: true, Why: "CockroachDB peers"},
	{From: "monitoring", To: "cell/cell", Required: true, Why: "metrics"},
	{From: "monitoring", To: "cell/preview", Required: true, Why: "metrics"},
	{From: "monitoring", To: "cell/database", Required: true, Why: "metrics"},
	{From: "monitoring", To: "edge/database", Required: true, Why: "metrics"},
	{From: "monitoring", To: "cell/renderer", Required: true, Ports: []string{"metrics"},
		Why: "the renderer's metrics listener (RENDER_METRICS_ADDR), never its credentialed control port"},
	{From: "*", To: "dns", Why: "cluster DNS"},
}

// requiredDNS: these classes must reach cluster DNS (service names in their settings).
var requiredDNS = []string{"edge/router", "cell/cell", "cell/preview", "cell/renderer", "cell/database", "edge/database"}

// Flow is traffic the NetworkPolicies allow.
type Flow struct {
	From, To           string
	FromClass, ToClass string
	Ports              []string
}

func (f Flow) String() string {
	return fmt.Sprintf("%s -> %s [%s]", f.From, f.To, strings.Join(f.Ports, " "))
}

type epPort struct {
	port  int32
	name  string
	proto corev1.Protocol
}

// endpoint is a source or destination of traffic: a workload's pods, or something outside.
type endpoint struct {
	name  string
	class string
	// ns is the namespace of a pod endpoint; "" for an address outside the cluster's pods.
	ns       string
	nsLabels map[string]string
	labels   map[string]string
	ip       netip.Addr
	ports    []epPort
	// ours: a pod in a namespace the overlays render, so its namespace's policies apply.
	ours bool
}

// outside are the endpoints the checker puts around the deployment. Their addresses are what
// matters: pods of the cluster are in 10.244.0.0/16, so an ipBlock broad enough to reach the
// internet without excepting private ranges reaches pods, nodes and the API server too.
func outside() []*endpoint {
	tcp := func(ports ...int32) []epPort {
		var out []epPort
		for _, p := range ports {
			out = append(out, epPort{port: p, proto: corev1.ProtocolTCP})
		}
		return out
	}
	return []*endpoint{
		{name: "internet (203.0.113.7)", class: "internet", ip: netip.MustParseAddr("203.0.113.7"), ports: tcp(80, 443)},
		{name: "cloud metadata (169.254.169.254)", class: "metadata", ip: netip.MustParseAddr("169.254.169.254"), ports: tcp(80)},
		{name: "cloud metadata (fd00:ec2::254)", class: "metadata", ip: netip.MustParseAddr("fd00:ec2::254"), ports: tcp(80)},
		{name: "API server (10.0.0.2)", class: "apiserver", ip: netip.MustParseAddr("10.0.0.2"), ports: tcp(443, 6443)},
		{name: "node (10.0.0.10)", class: "node", ip: netip.MustParseAddr("10.0.0.10"), ports: tcp(22, 10250)},
		{name: "private network service (192.168.1.10)", class: "private", ip: netip.MustParseAddr("192.168.1.10"), ports: tcp(5432, 6379)},
		{name: "kube-system/kube-dns", class: "dns", ns: "kube-system",
			nsLabels: map[string]string{labelNamespaceName: "kube-system"}, labels: map[string]string{"k8s-app": "kube-dns"},
			ip:    netip.MustParseAddr("10.244.255.10"),
			ports: []epPort{{port: 53, name: "dns", proto: corev1.ProtocolUDP}, {port: 53, name: "dns-tcp", proto: corev1.ProtocolTCP}}},
		{name: "monitoring/prometheus", class: "monitoring", ns: "monitoring",
			nsLabels: map[string]string{labelNamespaceName: "monitoring", "slidecells.io/monitoring": "true"},
			labels:   map[string]string{"app.kubernetes.io/name": "prometheus"},
			ip:       netip.MustParseAddr("10.244.254.10"), ports: tcp(9090)},
		{name: "default/some-other-app", class: "cluster-pod", ns: "default",
			nsLabels: map[string]string{labelNamespaceName: "default"}, labels: map[string]string{"app": "other"},
			ip: netip.MustParseAddr("10.244.253.10"), ports: tcp(8080)},
	}
}

// endpoints returns the deployment's workloads (plus an operator's cellctl pod in each edge
// namespace) and the outside endpoints.
func (c *cluster) endpoints() ([]*endpoint, []Finding) {
	var out []*endpoint
	var findings []Finding
	i := 0
	next := func() netip.Addr {
		i++
		return netip.AddrFrom4([4]byte{10, 244, byte(i), 10})
	}
	for _, ns := range sortedKeys(c.namespaces) {
		l := c.namespaces[ns]
		if l[LabelTier] == "edge" {
			out = append(out, &endpoint{name: ns + "/cellctl (operator pod)", class: "edge/cellctl", ns: ns, nsLabels: l,
				labels: map[string]string{LabelRole: "cellctl"}, ip: next(), ours: true})
		}
	}
	for _, w := range c.workloads {
		nsl := c.namespaces[w.namespace]
		tier := nsl[LabelTier]
		if tier == "" && nsl != nil {
			findings = append(findings, Finding{Rule: RuleLabels, Overlay: w.obj.Overlay, Object: "Namespace/" + w.namespace,
				Message: "has no " + LabelTier + " label: the network rules cannot tell what it holds"})
		}
		e := &endpoint{name: w.namespace + "/" + w.name, class: tier + "/" + w.role(), ns: w.namespace, nsLabels: nsl,
			labels: w.labels, ip: next(), ours: true}
		for _, ct := range w.spec.Containers {
			for _, p := range ct.Ports {
				proto := p.Protocol
				if proto == "" {
					proto = corev1.ProtocolTCP
				}
				e.ports = append(e.ports, epPort{port: p.ContainerPort, name: p.Name, proto: proto})
			}
		}
		out = append(out, e)
	}
	return append(out, outside()...), findings
}

// checkFlows computes every flow the policies allow and compares it with the flow table.
func (c *cluster) checkFlows() ([]Flow, []Finding) {
	eps, out := c.endpoints()
	out = append(out, c.checkIPBlocks()...)
	var flows []Flow
	allowed := map[[2]*endpoint]bool{}
	for _, src := range eps {
		for _, dst := range eps {
			if !src.ours && !dst.ours {
				continue // outside to outside: not the deployment's business
			}
			if src == dst && len(c.workloadsNamed(src)) == 0 {
				continue
			}
			var ports, outside []string
			r := tableRule(src, dst)
			for _, p := range dst.ports {
				if c.allows(src, dst, p) {
					ports = append(ports, fmt.Sprintf("%d/%s", p.port, p.proto))
					if r != nil && len(r.Ports) > 0 && !contains(r.Ports, p.name) {
						outside = append(outside, fmt.Sprintf("%d/%s (%s)", p.port, p.proto, p.name))
					}
				}
			}
			if len(outside) > 0 {
				out = append(out, Finding{Rule: RuleFlow, Object: "NetworkPolicy",
					Message: fmt.Sprintf("%s to %s (%s -> %s) is allowed on %s, but the flow table allows only port %s",
						src.name, dst.name, src.class, dst.class, strings.Join(outside, ", "), strings.Join(r.Ports, ", "))})
			}
			if len(ports) == 0 {
				continue
			}
			allowed[[2]*endpoint{src, dst}] = true
			f := Flow{From: src.name, To: dst.name, FromClass: src.class, ToClass: dst.class, Ports: ports}
			flows = append(flows, f)
			if r == nil {
				out = append(out, Finding{Rule: RuleFlow, Object: "NetworkPolicy",
					Message: fmt.Sprintf("%s to %s (%s -> %s) on %s is allowed, but the flow table has no such flow%s",
						src.name, dst.name, src.class, dst.class, strings.Join(ports, ", "), flowHint(src, dst))})
			}
		}
	}
	// Required flows must be allowed, for every pair of endpoints they name.
	for _, r := range flowTable {
		if !r.Required {
			continue
		}
		for _, src := range eps {
			for _, dst := range eps {
				if src.class != r.From || dst.class != r.To || (r.Same && src.ns != dst.ns) {
					continue
				}
				if !allowed[[2]*endpoint{src, dst}] {
					out = append(out, Finding{Rule: RuleFlowBlocked, Object: "NetworkPolicy",
						Message: fmt.Sprintf("%s to %s (%s -> %s: %s) is blocked by the policies", src.name, dst.name, r.From, r.To, r.Why)})
				}
			}
		}
	}
	for _, src := range eps {
		if !src.ours || !contains(requiredDNS, src.class) {
			continue
		}
		for _, dst := range eps {
			if dst.class == "dns" && !allowed[[2]*endpoint{src, dst}] {
				out = append(out, Finding{Rule: RuleFlowBlocked, Object: "NetworkPolicy",
					Message: fmt.Sprintf("%s cannot reach cluster DNS (%s)", src.name, dst.name)})
			}
		}
	}
	sort.Slice(flows, func(i, j int) bool {
		if flows[i].From != flows[j].From {
			return flows[i].From < flows[j].From
		}
		return flows[i].To < flows[j].To
	})
	return flows, out
}

func flowHint(src, dst *endpoint) string {
	switch {
	case src.class == "cell/renderer":
		return ": a renderer reaches its own preview host only (and DNS)"
	case dst.class == "cell/renderer":
		return ": only the renderers' own cell backend reaches them"
	case src.class == "internet" || src.class == "cluster-pod":
		return ": only the router is public"
	}
	return ""
}

// workloadsNamed reports the workloads behind an endpoint when traffic between its own pods
// counts (more than one replica).
func (c *cluster) workloadsNamed(e *endpoint) []*workload {
	for _, w := range c.workloads {
		if e.ns == w.namespace && e.name == w.namespace+"/"+w.name && w.replicas > 1 {
			return []*workload{w}
		}
	}
	return nil
}

func tableRule(src, dst *endpoint) *flowRule {
	for i := range flowTable {
		r := &flowTable[i]
		if (r.From == "*" || r.From == src.class) && (r.To == "*" || r.To == dst.class) && (!r.Same || src.ns == dst.ns) {
			return r
		}
	}
	return nil
}

// allows: traffic from src to dst's port p passes src's egress policies and dst's ingress
// policies (Kubernetes NetworkPolicy semantics: a pod selected by no policy of a direction is
// open in that direction; policies add up).
func (c *cluster) allows(src, dst *endpoint, p epPort) bool {
	if src.ours && !c.passes(src, dst, p, networkingv1.PolicyTypeEgress) {
		return false
	}
	if dst.ours && !c.passes(dst, src, p, networkingv1.PolicyTypeIngress) {
		return false
	}
	return true
}

// passes checks the policies of pod's namespace that select pod, in one direction, against
// the other end peer and the destination port p.
func (c *cluster) passes(pod, peer *endpoint, p epPort, dir networkingv1.PolicyType) bool {
	isolated := false
	for _, pol := range c.policies[pod.ns] {
		if !hasType(pol, dir) {
			continue
		}
		sel := pol.Spec.PodSelector
		if ok, err := matches(&sel, pod.labels); err != nil || !ok {
			continue
		}
		isolated = true
		if dir == networkingv1.PolicyTypeEgress {
			for _, r := range pol.Spec.Egress {
				if c.peersMatch(r.To, pol.Namespace, peer) && portsMatch(r.Ports, p) {
					return true
				}
			}
		} else {
			for _, r := range pol.Spec.Ingress {
				if c.peersMatch(r.From, pol.Namespace, peer) && portsMatch(r.Ports, p) {
					return true
				}
			}
		}
	}
	return !isolated
}

func hasType(pol *networkingv1.NetworkPolicy, t networkingv1.PolicyType) bool {
	if len(pol.Spec.PolicyTypes) == 0 {
		return t == networkingv1.PolicyTypeIngress || (t == networkingv1.PolicyTypeEgress && len(pol.Spec.Egress) > 0)
	}
	for _, x := range pol.Spec.PolicyTypes {
		if x == t {
			return true
		}
	}
	return false
}

func (c *cluster) peersMatch(peers []networkingv1.NetworkPolicyPeer, polNS string, e *endpoint) bool {
	if len(peers) == 0 {
		return true
	}
	for _, peer := range peers {
		if peer.IPBlock != nil {
			if ipBlockContains(peer.IPBlock, e.ip) {
				return true
			}
			continue
		}
		if e.ns == "" {
			continue // selectors pick pods only
		}
		var nsOK bool
		if peer.NamespaceSelector == nil {
			nsOK = e.ns == polNS
		} else {
			nsOK, _ = matches(peer.NamespaceSelector, e.nsLabels)
		}
		podOK := true
		if peer.PodSelector != nil {
			podOK, _ = matches(peer.PodSelector, e.labels)
		}
		if nsOK && podOK {
			return true
		}
	}
	return false
}

// ipBlockContains: CIDR minus its exceptions. An unparsable block contains nothing (the
// strict decode does not check CIDRs, so a bad one is reported by checkIPBlocks).
func ipBlockContains(b *networkingv1.IPBlock, ip netip.Addr) bool {
	if !ip.IsValid() {
		return false
	}
	pfx, err := netip.ParsePrefix(b.CIDR)
	if err != nil || !pfx.Contains(ip) {
		return false
	}
	for _, ex := range b.Except {
		if e, err := netip.ParsePrefix(ex); err == nil && e.Contains(ip) {
			return false
		}
	}
	return true
}

// checkIPBlocks reports CIDRs the API server would refuse.
func (c *cluster) checkIPBlocks() []Finding {
	var out []Finding
	for _, ns := range sortedKeys(c.policies) {
		for _, pol := range c.policies[ns] {
			var peers []networkingv1.NetworkPolicyPeer
			for _, r := range pol.Spec.Ingress {
				peers = append(peers, r.From...)
			}
			for _, r := range pol.Spec.Egress {
				peers = append(peers, r.To...)
			}
			for _, p := range peers {
				if p.IPBlock == nil {
					continue
				}
				for _, cidr := range append([]string{p.IPBlock.CIDR}, p.IPBlock.Except...) {
					if _, err := netip.ParsePrefix(cidr); err != nil {
						o := c.objectOf(pol)
						out = append(out, Finding{Rule: RuleDecode, Overlay: o.Overlay, Object: o.Ref(), Message: fmt.Sprintf("ipBlock %q is not a CIDR", cidr)})
					}
				}
			}
		}
	}
	return out
}

func portsMatch(ports []networkingv1.NetworkPolicyPort, p epPort) bool {
	if len(ports) == 0 {
		return true
	}
	for _, np := range ports {
		proto := corev1.ProtocolTCP
		if np.Protocol != nil {
			proto = *np.Protocol
		}
		if proto != p.proto {
			continue
		}
		if np.Port == nil {
			return true
		}
		if np.Port.Type == intstr.String {
			if np.Port.StrVal == p.name && p.name != "" {
				return true
			}
			continue
		}
		if np.EndPort != nil {
			if p.port >= np.Port.IntVal && p.port <= *np.EndPort {
				return true
			}
		} else if np.Port.IntVal == p.port {
			return true
		}
	}
	return false
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
