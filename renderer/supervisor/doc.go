// Package supervisor owns the lifetime of one attempt's child and its
// isolation: it leases the attempt an unprivileged user of its own, creates
// the attempt's cgroup (memory, pids and CPU limits for the whole attempt),
// starts the child in new PID, network, mount and IPC namespaces through an
// exec shim that builds a restricted file view (a size-bounded private temp
// file system, hidden credentials, its own /proc), has the shim open the
// attempt's one egress listener inside the network namespace and hand it
// over, starts the child with no capability, no_new_privs and a seccomp
// filter of its own (ChildDeniedSyscalls), enforces the hard deadline
// on a monotonic timer, stops the child in the order the render
// specification demands (mark stopped, ask the child to close, kill the
// whole attempt once the cleanup grace is used up), and proves that no
// process of the attempt is left before it reports the resources released.
//
// "Proven gone" means: the first process of the attempt's PID namespace
// (its init) has been reaped, which the kernel allows only after every
// other process of that namespace is gone, however it left its process
// group, session or environment; and the attempt's cgroup is empty and
// removed. Until that holds the group stays unreleased, and the caller must
// keep the slot occupied.
//
// It works in two modes (Mode), chosen by the control process's effective
// user ID, with the same boundary: as root it switches the child to the
// leased user itself; unprivileged, each attempt also gets a user namespace
// of its own in which only the leased ID is mapped (by the set-user-ID
// helpers newuidmap and newgidmap, from the user's subordinate ranges), and
// its cgroups come from a subtree delegated to the user.
//
// There is no unisolated mode: Start refuses to run without a user ID pool
// and cgroups, and UIDPool.Check, CheckKernel and OpenCgroups fail, saying
// what is missing, where the kernel or the host cannot provide them.
//
// The package knows nothing about browsers or HTTP. Nothing outside it
// touches a PID.
package supervisor
