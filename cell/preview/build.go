// Package preview is the cell's preview host (render-execution.md, "Preview host (Runtime)"): it
// serves preview documents built from render snapshots (cell/snapshot) on its own listener and
// origin — never the API's — with the runtime that implements render-ready.v1, and it is the
// cell's side of the preview-runtime ↔ backend interface (BackendRoot).
//
// # Pieces
//
//   - NewBackend: the handler the cell mounts under /internal/preview/v1/: snapshot manifests,
//     the objects they list and the published key set, for the preview service credential only.
//   - Puller: the host's client of that interface, caching manifests and objects (immutable,
//     bounded by count and bytes) and the key set (refreshed; an unknown key ID refreshes once).
//   - Host: the documents (GET <prefix>/snapshots/{ref}, prefix "" or /preview/w/{ws}), their
//     subresources (module.js, styles.css, blobs/<hex>), the runtime (<prefix>/runtime/<version>/…)
//     and platform assets. Bases come from one resolver (Resolve).
//   - The runtime (runtime/): the bootstrap, inlined as the document's first script, which
//     speaks render-ready.v1 over the renderer's CDP binding; main.js, which evaluates and mounts
//     the compiled module with React 18.3.1; the kit modules (@kit/layout, text, media, chart,
//     ready). BuildRuntime bundles them with esbuild from the npm packages package-lock.json pins.
//
// # Access
//
// A document needs a preview-access token (shared/ticket, type preview-access.v1) in the
// Render-Preview-Access header (the renderer) or the access query parameter (a public browser):
// signature by a published key, unexpired, SnapshotRef the URL's, Path exactly the request's,
// and under the router's prefix the workspace of the prefix. The answer sets the token as an
// HttpOnly, SameSite=Strict cookie whose path is the document's, so its subresources load
// without a token; a subresource is served only with a cookie token for the same snapshot and
// path, and only objects the manifest lists. Every refusal is one identical 404 that does not
// tell a bad token from a missing snapshot. Documents carry a strict CSP (scripts: self, the
// bootstrap's nonce, the configured runtime base, the hashes of an html page's own inline
// scripts; no connections, frames, plugins or base changes; no framing).
//
// # Readiness that content cannot forge
//
// The bootstrap takes the binding __renderReadyV1 and deletes it before any content exists,
// captures every built-in it uses, and writes each payload itself from closure state (no
// JSON.stringify of objects content can reach, no prototype lookups), so content that replaces
// window.__renderReady, JSON, Object.freeze, toJSON or prototype setters changes nothing it
// sends. Identity (artifact_id = snapshot ref, input_digest, host_build = HostBuild, protocol)
// comes from the document the host wrote. Host faults — the styles, the runtime or the module
// not loading, the runtime not starting — are init_error and can only be raised before content
// runs; everything after is a content fault (module evaluation, a missing default export, a
// render throw caught by the error boundary, an undeclared scene, an unknown asset ID: blocking;
// uncaught errors in handlers or timers: not blocking). So a page can fail only itself, never
// raise RENDER_CONTRACT_MISMATCH.
package preview

import "slidecells/shared/rendercontract"

// HostBuild identifies this preview host build (rendercontract.PreviewHostBuild, where the
// cell's snapshots and the release tools read it without importing the host).
const HostBuild = rendercontract.PreviewHostBuild
