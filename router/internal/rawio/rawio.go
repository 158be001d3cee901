// Package rawio reads from and writes to non-blocking sockets with raw system calls, for the
// callbacks of syscall.RawConn.Read and Write on the router's request path.
//
// syscall.Read and Write (what net.Conn uses) tell the Go scheduler that the goroutine enters
// a system call that may block. A socket's read or write never blocks (net's descriptors are
// non-blocking), but on a virtual machine where a system call costs tens of microseconds, the
// scheduler's monitor thread (sysmon) often finds a processor "in a system call" for longer
// than its 20 µs tick, hands the processor to another thread and keeps waking up every 20 µs
// to look again: measured on the benchmark machine, that monitor cost about an eighth of the
// router's CPU (BENCHMARKS.md, "Router"). Raw system calls skip that bookkeeping: the
// goroutine keeps its processor for the few microseconds a socket call takes, as it would
// for any other short computation.
package rawio

import (
	"syscall"
	"unsafe"
)

// MaxWrite is the largest write done in one raw system call, since copying more into the
// socket may take long enough that the scheduler should know: callers split larger writes
// (the router's client connections) or send the rest through net.Conn (router/hop).
const MaxWrite = 256 << 10

// Read reads into p from fd, retrying on EINTR. n is 0 on error; err is syscall.EAGAIN when
// nothing is there yet.
func Read(fd uintptr, p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	for {
		n, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
		switch e {
		case 0:
			return int(n), nil
		case syscall.EINTR:
			continue
		default:
			return 0, e
		}
	}
}

// Queued is how many bytes written to the socket fd its peer has not yet acknowledged, sent or
// not (the SIOCOUTQ ioctl; Linux).
func Queued(fd uintptr) (int, error) {
	var n int32
	_, _, e := syscall.RawSyscall(syscall.SYS_IOCTL, fd, syscall.TIOCOUTQ, uintptr(unsafe.Pointer(&n)))
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

// Write writes p (at most MaxWrite bytes is the callers' rule) to fd, retrying on EINTR, and
// returns how much the socket took: less than len(p) with err syscall.EAGAIN when its buffer
// is full.
func Write(fd uintptr, p []byte) (int, error) {
	done := 0
	for done < len(p) {
		n, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&p[done])), uintptr(len(p)-done))
		switch e {
		case 0:
			done += int(n)
		case syscall.EINTR:
		default:
			return done, e
		}
	}
	return done, nil
}
