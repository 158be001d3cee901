// Package supervisor owns the lifetime of one execution process group: it
// starts a child in its own process group with its own temp directory, an
// explicit environment, resource limits and (when running as root) an
// unprivileged user; it enforces the hard deadline on a monotonic timer; it
// stops the child in the order the render specification demands (mark
// stopped, ask the child to close, kill the whole group once the cleanup
// grace is used up); and it proves that no process of the group is left
// before it reports the resources as released.
//
// "Proven gone" means: no process in /proc has the group's process group ID,
// and no process carries the group's environment tag (which catches helpers
// that moved to a session of their own, such as a crash handler); every such
// process that became our child through PR_SET_CHILD_SUBREAPER is reaped, so
// no zombie is left either. Until that holds the group stays unreleased, and
// the caller must keep the slot occupied.
//
// The package knows nothing about browsers or HTTP. Nothing outside it
// touches a PID.
package supervisor
