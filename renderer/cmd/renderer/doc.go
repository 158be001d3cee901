// Command renderer is the render executor: one slot, a fresh Chromium per
// attempt, supervised to the last process. It serves /internal/render/v1 on
// RENDER_LISTEN_ADDR (see renderer/README.md for every setting) and logs the
// address it actually listens on as the field "addr".
//
// The same binary is its own execution child ("renderer child", started by
// the supervisor, never by hand), prints a fresh ticket key pair with
// "renderer keygen <kid>", and prints this instance's RenderProfile, the
// file a release writes as RENDER_PROFILE_MANIFEST for renderers and cells,
// with "renderer profile [--preview-host-build B] [--image-digest D]".
package main
