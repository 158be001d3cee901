// Command renderbench measures the renderer end to end: it starts the
// fixture preview host and a real renderer process, then alternates
// page.capture attempts of a 1280×720 slide (POST → terminal receipt →
// artifact download) with plain `chromium --headless --screenshot` runs of
// the same page, and reports both medians, their ratio, the renderer's
// admission → result time from its receipts (and its ratio), the attempts
// served warm (a ready standby) and cold, the load average before and after,
// and the peak RSS (VmHWM) of the renderer control process. By default each
// renderer sample first waits until /readyz reports a ready standby, as a
// slot that was idle between attempts has one; -wait-standby=false posts at
// once.
//
//	go build -o /tmp/renderer ./renderer/cmd/renderer
//	go run ./renderer/cmd/renderbench -renderer /tmp/renderer -n 30
//	go run ./renderer/cmd/renderbench -renderer /tmp/renderer -n 30 -unprivileged
//
// RENDER_STANDBY_CPUS, when set in its environment, is passed on to the
// renderer (0: standbys at the attempt's CPU); the report gives the mean
// time from a standby's start to its ready browser.
//
// -unprivileged (as root) prepares the unprivileged user, its subordinate
// IDs and a delegated cgroup (renderer/internal/unpriv) and runs the
// renderer as that user, in user-namespace mode.
//
// Traffic stays on loopback; the run is bounded by -n.
package main
