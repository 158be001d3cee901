package supervisor

import (
	"fmt"
	"net"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"
)

// listenIn opens a listening socket inside the network namespace of pid. The
// socket belongs to the supervisor (it accepts and serves connections from
// its own goroutines, and dials out from the host's namespace), but its
// address lives in the child's namespace: that is the attempt's one way out.
func listenIn(pid int, network, addr string) (net.Listener, error) {
	target, err := unix.Open("/proc/"+strconv.Itoa(pid)+"/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("supervisor: child network namespace: %w", err)
	}
	defer unix.Close(target)
	type result struct {
		ln  net.Listener
		err error
	}
	ch := make(chan result, 1)
	// A fresh goroutine on a locked thread: if the thread cannot be put
	// back into the host's namespace it stays locked and the runtime
	// retires it when the goroutine ends, so no other goroutine ever runs
	// in the child's namespace by accident.
	go func() {
		runtime.LockOSThread()
		own, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			ch <- result{err: err}
			return
		}
		defer unix.Close(own)
		if err := unix.Setns(target, unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: fmt.Errorf("supervisor: enter child network namespace: %w", err)}
			return
		}
		ln, lerr := net.Listen(network, addr)
		if err := unix.Setns(own, unix.CLONE_NEWNET); err == nil {
			runtime.UnlockOSThread()
		}
		ch <- result{ln, lerr}
	}()
	r := <-ch
	return r.ln, r.err
}
