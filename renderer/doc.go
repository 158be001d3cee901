// Package renderer is the render executor's control process: it serves the
// internal protocol /internal/render/v1 (render-execution.md), owns the one
// activity slot, admits an attempt only with a valid admission ticket,
// starts the execution child through the supervisor (prepared ahead as the
// idle slot's standby and bound to the attempt at admission, see standby.go),
// keeps receipts, cancel
// marks and terminal artifacts for their retention times, and publishes a
// terminal receipt only after the supervisor proved every process of the
// attempt gone.
//
// It never runs a browser itself (that is renderer/chromium, in the child),
// never touches a PID (that is renderer/supervisor), keeps no queue (busy
// means 429, explicitly not taken over) and never retries: retry is the
// coordinator's decision. Nothing here talks to a database.
package renderer
