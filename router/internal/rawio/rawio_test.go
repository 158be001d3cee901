package rawio

import (
	"bytes"
	"syscall"
	"testing"
)

// pair is a connected pair of non-blocking stream sockets.
func pair(t *testing.T) (a, b uintptr) {
	t.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fds[0]); syscall.Close(fds[1]) })
	return uintptr(fds[0]), uintptr(fds[1])
}

func TestReadWrite(t *testing.T) {
	a, b := pair(t)
	buf := make([]byte, 16)
	if n, err := Read(b, buf); n != 0 || err != syscall.EAGAIN {
		t.Fatalf("read from an empty socket = %d, %v; want 0, EAGAIN", n, err)
	}
	if n, err := Write(a, []byte("hello")); n != 5 || err != nil {
		t.Fatalf("write = %d, %v", n, err)
	}
	if n, err := Read(b, buf); n != 5 || err != nil || string(buf[:n]) != "hello" {
		t.Fatalf("read = %d %q, %v", n, buf[:n], err)
	}
	if n, err := Read(b, nil); n != 0 || err != nil {
		t.Fatalf("empty read = %d, %v", n, err)
	}
	if err := syscall.Shutdown(int(a), syscall.SHUT_WR); err != nil {
		t.Fatal(err)
	}
	if n, err := Read(b, buf); n != 0 || err != nil {
		t.Fatalf("read after the peer's end = %d, %v; want 0, nil (end of stream)", n, err)
	}
}

func TestWriteStopsWhenTheSocketIsFull(t *testing.T) {
	a, b := pair(t)
	big := bytes.Repeat([]byte("x"), 8<<20)
	n, err := Write(a, big)
	if err != syscall.EAGAIN || n <= 0 || n >= len(big) {
		t.Fatalf("write of 8 MiB = %d, %v; want part of it and EAGAIN", n, err)
	}
	got := 0
	buf := make([]byte, 64<<10)
	for {
		k, err := Read(b, buf)
		if err == syscall.EAGAIN {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got += k
	}
	if got != n {
		t.Errorf("read %d bytes, want the %d written", got, n)
	}
}
