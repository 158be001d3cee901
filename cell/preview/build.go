// Package preview is the cell's preview host: it serves preview documents built from render
// snapshots (cell/snapshot) on its own listener and origin, with the runtime that implements
// render-ready.v1.
package preview

// HostBuild identifies the preview host build; every snapshot records it and the render
// profile pins it (preview_host_build), so a renderer refuses a document of another build.
const HostBuild = "preview-host-1"
