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
// The state travels over a channel page content cannot write.
//
// Before navigating, the renderer adds a DevTools binding named ReadyBinding
// ("__renderReadyV1", Runtime.addBinding) and listens for
// Runtime.bindingCalled.
//
// The preview document's FIRST script, an inline classic script before the
// import map, the module scripts and any content, is the host's bootstrap.
// Before anything else it captures the binding and removes it:
//
//	const send = typeof window.__renderReadyV1 === "function" ? window.__renderReadyV1 : null;
//	try { delete window.__renderReadyV1; } catch (e) {}
//
// It captures every built-in it uses later (its serializer, Object.freeze,
// Object.keys, Array.prototype methods, EventTarget.prototype.addEventListener,
// the CustomEvent detail getter, …) into its closure, so content that replaces
// globals or prototypes (JSON.stringify, Object.prototype.toJSON,
// Array.prototype.push) cannot change what it sends. After every change of
// state (init, mount, resource counters, scene, scene receipts, content
// faults, init errors) it calls send(<JSON text of the whole state>). Without
// a binding (an ordinary browser) it sends nothing. Either way it may keep a
// frozen copy on window.__renderReady (ReadyGlobal) for people debugging;
// that copy is content-writable and nobody trusts it.
//
// The renderer trusts only bindingCalled events whose execution context is
// the default (main-world) context of the top frame of the document it
// navigated to. Calls from iframes, from other worlds, or after the top frame
// committed another document are ignored; a top-level navigation away from
// the preview document fails the attempt (RENDER_CONTENT_ERROR) and is never
// success. The latest trusted payload is the state. A trusted payload that is
// not JSON of the shape below (or is above MaxReadyStateBytes) is
// RENDER_CONTRACT_MISMATCH: content cannot reach the channel, so only a
// broken host produces one. A document that finishes loading without any
// state on the channel lacks the protocol (RENDER_CONTRACT_MISMATCH); an
// intact bootstrap sends its first state before content runs, so content
// that merely breaks window globals cannot cause that.
//
// document.fonts.status, document.readyState and the layout analysis are
// read in an isolated world of the top frame (Page.createIsolatedWorld),
// whose globals and prototypes content cannot touch; it shares only the DOM.
//
// Shape of one payload (see ReadyState for the Go type):
//
//	{
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
// kind is pending, and document.fonts.status (read in the isolated world) is
// "loaded". A wrong protocol string or a value outside the enumerations above
// makes the state undeterminable, which is an execution failure
// (RENDER_CONTRACT_MISMATCH); the renderer never falls back to DOM checks,
// fixed sleeps or network idleness.
//
// Scene switches (component.diagnose) stay renderer→page: the renderer
// evaluates, in the page's main world,
//
//	window.dispatchEvent(new CustomEvent("render-ready.v1:switch-scene",
//	    {detail: {scene: "dense", request_id: "sw_…"}}))
//
// The bootstrap registers its listener before content runs (so it is the
// first), and answers by appending {request_id, scene, state} to
// scene_receipts once the scene is mounted (or failed), updating scene,
// mount, resources and content_faults for the new scene, and sending the
// state. With no operation_options.scenes, component.diagnose runs "default"
// and then every other scene the host declares in scenes (at most MaxScenes
// in all: beyond them the diagnosis carries a SCENES_OVER_LIMIT error
// finding naming how many were declared); with scenes given it runs
// "default" plus those.
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
