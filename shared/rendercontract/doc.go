// Package rendercontract is the wire contract of the render subsystem
// (render-execution.md): the execution request the coordinator sends to a
// renderer, the receipt and result the renderer returns, artifact
// descriptors, diagnoses, the error model with its codes, categories and
// stages, the limits, and the preview host's readiness protocol
// render-ready.v1.
//
// It holds types, constants and pure validation only: no HTTP client, no
// clock, no I/O. The coordinator (cell) and the renderer both import it, so a
// field changes in one place.
//
// # Readiness protocol render-ready.v1
//
// The preview host publishes one plain object on window, under the global
// name ReadyGlobal ("__renderReady"), before the document's load event (so
// that "missing" can be told apart from "not yet"), and keeps it current by
// replacing or mutating its fields. The renderer only reads it with a fixed
// expression (JSON.stringify), so it must be JSON-serializable; functions on
// it are ignored. Shape (see ReadyState for the Go type):
//
//	window.__renderReady = {
//	  protocol: "render-ready.v1",          // exact; anything else is a contract mismatch
//	  artifact_id: "snap_…",                // the snapshot_ref of the execution request
//	  input_digest: "sha256:…",             // must equal the request's input_digest
//	  host_build: "preview-2025.11.22-1",   // preview host build identifier
//	  init: "pending" | "ok" | "failed",    // preview initialisation (host side)
//	  init_error: null | {code, message, permanent},   // host or network init fault, not content
//	  mount: "pending" | "mounted" | "failed",         // content mount state
//	  resources: {                          // visual resources of the current scene
//	    fonts:  {loaded: 0, failed: 0, pending: 0},
//	    images: {loaded: 0, failed: 0, pending: 0},
//	    other:  {loaded: 0, failed: 0, pending: 0},
//	    failures: [{kind: "font"|"image"|"other", ref: "asset id or short name", permanent: true}]
//	  },
//	  scenes: ["default", "dense", …],      // component scenes; ["default"] for pages
//	  scene: "default",                     // scene currently shown
//	  scene_receipts: [{request_id, scene, state: "ready"|"failed", message}],
//	  content_faults: [{code, message, scene, blocking: true|false}]
//	}
//
// The page is ready when init is "ok", mount is "mounted", no resource of any
// kind is pending, and document.fonts.status is "loaded". A missing object, a
// wrong protocol string or a value outside the enumerations above makes the
// state undeterminable, which is an execution failure
// (RENDER_CONTRACT_MISMATCH); the renderer never falls back to DOM checks,
// fixed sleeps or network idleness.
//
// Scene switches (component.diagnose): the renderer dispatches
//
//	window.dispatchEvent(new CustomEvent("render-ready.v1:switch-scene",
//	    {detail: {scene: "dense", request_id: "sw_…"}}))
//
// and the host answers by appending {request_id, scene, state} to
// scene_receipts once the scene is mounted (or failed), updating scene,
// mount, resources and content_faults for the new scene.
//
// Content faults are deterministic problems of the content (a component
// throws, a required prop is missing); blocking ones make page.capture fail
// with RENDER_CONTENT_ERROR and are reported as findings by the diagnose
// operations. Network or host problems belong in init_error or resource
// failures, never in content_faults.
//
// # Preview access
//
// The preview document is addressed by the renderer's configured navigation
// base and the snapshot_ref (PreviewPath); the request carries no URL. The
// preview_access token is attached as the PreviewAccessHeader request header
// only to a request whose origin and path equal the document's exactly, and
// the check is repeated for every redirect hop.
package rendercontract
