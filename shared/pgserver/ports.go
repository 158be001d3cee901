package pgserver

import (
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// Ports handed out by FreePort are taken below the kernel's ephemeral range, so no outgoing
// connection's local port can take one between FreePort and the child's bind, and each is
// reserved across processes with an flock on a file named after it, held until this process
// exits, so two test binaries running at once never get the same port. (A port from a :0
// listener is in the ephemeral range: a busy machine's client sockets reused it before the
// child bound it, and the child exited at start with "address already in use".)
const (
	reservedLow  = 15000 // the lowest port FreePort hands out
	minimumSpan  = 2000  // fewer ports than this below the ephemeral range: fall back to :0
	reserveTries = 500
)

var (
	reserveMu sync.Mutex
	reserved  []*os.File // locks held for the life of the process
)

// FreePort returns a TCP port on 127.0.0.1 that is free now and that no other caller of
// FreePort, in this process or another, gets while this process lives.
func FreePort() (int, error) {
	lo, hi := reservedLow, ephemeralLow()
	if hi-lo < minimumSpan {
		return anyPort()
	}
	dir := filepath.Join(os.TempDir(), "slidecells-ports")
	if err := os.MkdirAll(dir, 0o1777); err != nil {
		return anyPort()
	}
	reserveMu.Lock()
	defer reserveMu.Unlock()
	for range reserveTries {
		port := lo + rand.IntN(hi-lo)
		f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(port)), os.O_CREATE|os.O_RDWR, 0o666)
		if err != nil {
			continue
		}
		if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
			f.Close() // another process (or an earlier call here) holds it
			continue
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			f.Close() // in use by something that does not take part in the reservation
			continue
		}
		l.Close()
		reserved = append(reserved, f)
		return port, nil
	}
	return anyPort()
}

// ephemeralLow is the first port of the kernel's ephemeral range (32768 when it cannot be read).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) < 1 {
		return 32768
	}
	n, err := strconv.Atoi(f[0])
	if err != nil || n <= 0 || n > 65535 {
		return 32768
	}
	return n
}

// anyPort is the kernel's choice of a free port, free only a moment ago.
func anyPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
