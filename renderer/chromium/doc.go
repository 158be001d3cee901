// Package chromium is the execution child of the renderer: the program that
// runs inside one supervised process group, launches one fresh Debian
// Chromium through chromedp with a new profile directory, opens the preview
// document, waits on the render-ready.v1 protocol and nothing else, and
// produces a PNG capture or a layout diagnosis.
//
// The child reads one Job (JSON) from standard input and writes Events to
// standard output: JSON lines, where an artifact event is followed by exactly
// the announced number of raw bytes. Artifacts never touch a file the
// control process would have to trust. Standard error is free-form and is
// redacted by the control process before logging.
//
// What the child must not do: decide its own outcome after being told to
// stop, keep a browser after it exits, send any credential except the
// preview access token (and that only to the preview document's exact origin
// and path, checked again on every redirect hop), or let the browser reach an
// origin that is not allowed. Requests to other origins fail inside the
// browser (Fetch interception), and everything the interception cannot see,
// WebSocket handshakes and DNS included, goes to a proxy the child runs that
// refuses every connection. The network-level boundary is deployment's
// (deploy/renderer-network.md); these are the in-browser layers.
//
// The package also computes the browser part of the RenderProfile: the exact
// launch flags and the browser build.
package chromium
