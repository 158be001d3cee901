package supervisor

import (
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// shimCapabilities are the capabilities the shim needs in the attempt's
// user namespace (user-namespace mode) to build the file view and bring up
// loopback; it drops them all before the child runs.
var shimCapabilities = []uintptr{
	unix.CAP_SYS_ADMIN,    // mounts
	unix.CAP_NET_ADMIN,    // loopback up
	unix.CAP_SETUID,       // become the attempt's user
	unix.CAP_SETGID,       // its group, no supplementary groups
	unix.CAP_SETPCAP,      // empty the bounding set
	unix.CAP_CHOWN,        // the attempt directory
	unix.CAP_DAC_OVERRIDE, // folders of the private temp file system
	unix.CAP_FOWNER,
}

// socketPair returns the supervisor's and the shim's ends of a
// close-on-exec SOCK_SEQPACKET socket pair.
func socketPair() (*os.File, *os.File, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("supervisor: control socket: %w", err)
	}
	return os.NewFile(uintptr(fds[0]), "shim-control"), os.NewFile(uintptr(fds[1]), "shim-control-child"), nil
}

// shimControl is the supervisor's end of the control socket (the protocol
// is described at shimCtlFD). It stays open while the group lives: the
// shim treats its hang-up as the supervisor's death.
type shimControl struct{ c *net.UnixConn }

// newShimControl takes over f (it is closed).
func newShimControl(f *os.File) (*shimControl, error) {
	defer f.Close()
	c, err := net.FileConn(f)
	if err != nil {
		return nil, fmt.Errorf("supervisor: control socket: %w", err)
	}
	uc, ok := c.(*net.UnixConn)
	if !ok {
		c.Close()
		return nil, errors.New("supervisor: control socket is not a Unix socket")
	}
	return &shimControl{c: uc}, nil
}

func (s *shimControl) Close() error { return s.c.Close() }

func (s *shimControl) send(msg string) error {
	_ = s.c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	_, err := s.c.Write([]byte(msg))
	return err
}

// recv reads one message and the descriptor that came with it, if any.
func (s *shimControl) recv(timeout time.Duration) (string, *os.File, error) {
	_ = s.c.SetReadDeadline(time.Now().Add(timeout))
	buf := make([]byte, 4096)
	oob := make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := s.c.ReadMsgUnix(buf, oob)
	if err != nil {
		return "", nil, err
	}
	if n == 0 {
		return "", nil, errors.New("shim ended without a report")
	}
	var file *os.File
	if oobn > 0 {
		msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
		if err == nil && len(msgs) == 1 {
			if fds, err := unix.ParseUnixRights(&msgs[0]); err == nil && len(fds) == 1 {
				file = os.NewFile(uintptr(fds[0]), "handed-over")
			}
		}
	}
	return string(buf[:n]), file, nil
}

// listen has the shim open a listener inside the attempt's network
// namespace and takes its socket over: the address lives in the child's
// namespace (its one way out), the socket belongs to the supervisor, which
// serves it from its own goroutines and dials out from the host's
// namespace. No thread of the supervisor ever enters the namespace.
func (s *shimControl) listen(network, addr string) (net.Listener, error) {
	if err := s.send("listen " + network + " " + addr); err != nil {
		return nil, err
	}
	msg, f, err := s.recv(5 * time.Second)
	if err != nil {
		return nil, err
	}
	if f == nil {
		return nil, fmt.Errorf("listener in the child's network namespace: %s", msg)
	}
	defer f.Close()
	if msg != "fd" {
		return nil, fmt.Errorf("listener in the child's network namespace: unexpected %q", msg)
	}
	return net.FileListener(f)
}
