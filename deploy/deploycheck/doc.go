// Package deploycheck renders the Kubernetes manifests of deploy/k8s and checks them offline:
// what `make deploy-check` runs, and what its tests prove rule by rule.
//
// Every overlay under <root>/overlays is rendered with kustomize (sigs.k8s.io/kustomize/api,
// in process, no kubectl and no network). Each rendered object is decoded strictly into its
// k8s.io/api type: an unknown field, a duplicate field, a field in the wrong case or a value of
// the wrong type is a finding, and so is a kind the checker does not know (schema downloads are
// not reachable here, so the Go types are the schema). Then the rules below run on all overlays
// together, as one cluster:
//
//   - pod security: every pod has no service-account token, no host namespaces, ports or paths,
//     a read-only root file system, all capabilities dropped, a RuntimeDefault or Localhost
//     seccomp profile, and CPU, memory and ephemeral-storage requests and limits. Every pod but
//     the renderer's runs as non-root without privilege escalation and adds no capability.
//   - the renderer: alone in its pod, root only inside its own user namespace (hostUsers:
//     false), a runtime class that exists, only the capabilities its isolation needs (SYS_ADMIN, NET_ADMIN, SETUID,
//     SETGID, KILL, CHOWN, DAC_OVERRIDE, FOWNER), never privileged, no Chromium sandbox switch,
//     no secret but its service credential, attempt limits set and inside the container's.
//   - network: a NetworkPolicy evaluator computes every flow the policies allow between the
//     workloads and a set of outside endpoints (the internet, the cloud metadata address, the
//     API server, a node, cluster DNS, a monitoring namespace) and compares it with the table
//     in flows.go, in both directions: a flow outside the table fails (a renderer reaching a
//     database, a public cell), and so does a flow of the table that the policies block.
//     Only the router's Service may be a LoadBalancer or NodePort.
//   - images: every image is slidecells/<target> with a tag, where <target> is a stage of the
//     Dockerfile, or a pinned third-party image of an explicit list.
//   - secrets: no Secret objects, no secret-looking value inline in an env var or ConfigMap, no
//     password in a URL; secrets reach containers as files (secretKeyRef only where a binary
//     has no file setting); every *_FILE path lies in a mounted volume.
//   - configuration: the cell's renderer list matches the renderer StatefulSet (worker IDs and
//     addresses), the renderers' preview base URL is the cell's navigation base and names the
//     preview Service, the preview host's backend URL names the cell's Service, the cell shares
//     its renderer and preview credentials with them (same Secret), and the render profile
//     ConfigMap declares this release's contract. Across pods the credentials travel over TLS
//     only: every renderer address and the preview host's backend URL are https, renderers and
//     the cell's internal listener take certificate and key from Secrets, the renderers'
//     probes use HTTPS, and cell and preview host trust a CA bundle from a Secret.
//   - references: selectors match their pod templates, StatefulSets name an existing Service,
//     every ConfigMap a pod uses exists, every volume mount names a volume.
//
// It must not reach a cluster or the network: it reads files only.
package deploycheck
