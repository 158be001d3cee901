// Command renderer is the render executor: one slot, a fresh Chromium per
// attempt, supervised to the last process. It serves /internal/render/v1 on
// RENDER_LISTEN_ADDR (see renderer/README.md for every setting) and logs the
// address it actually listens on as the field "addr".
//
// The same binary is its own execution child ("renderer child", started by
// the supervisor, never by hand) and prints a fresh ticket key pair with
// "renderer keygen <kid>".
package main
