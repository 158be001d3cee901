// Package chromium is the execution child of the renderer: the program that
// runs inside one supervised process group, launches one fresh Debian
// Chromium through chromedp with a new profile directory, opens the preview
// document, waits on the render-ready.v1 protocol and nothing else, and
// produces a PNG capture or a layout diagnosis. The protocol's state arrives
// on a DevTools binding the host's bootstrap captures before content runs,
// trusted only from the main world of the top frame's navigated document
// (channel.go); what the child reads of the page itself (fonts, document
// state, the layout analysis) it reads in an isolated world.
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
// origin that is not allowed. The boundary that holds is the kernel's: the
// child runs in its own network namespace whose only way out is the
// attempt's egress proxy (renderer/egress, served by the control process;
// see deploy/renderer-network.md), which the browser is pointed at for
// everything, loopback included. Requests to other origins also fail inside
// the browser (Fetch interception) and names other than the allowed hosts do
// not resolve: these in-browser layers are defence in depth only.
//
// The package also computes the browser part of the RenderProfile: the exact
// launch flags and the browser build.
package chromium
