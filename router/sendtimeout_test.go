package router

import (
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// smallBuffers shrinks the kernel's buffers between server and client, so that a client that
// does not read fills them after a few KiB.
func smallBuffers(t *testing.T, server, client net.Conn) {
	t.Helper()
	if err := server.(*net.TCPConn).SetWriteBuffer(4096); err != nil {
		t.Fatal(err)
	}
	if err := client.(*net.TCPConn).SetReadBuffer(4096); err != nil {
		t.Fatal(err)
	}
}

func TestSendTimeoutCutsAClientThatDoesNotRead(t *testing.T) {
	for _, tc := range []struct {
		name string
		size int
	}{{"raw", 32 << 10}, {"in pieces of rawio.MaxWrite", 1 << 20}} { // rawio.MaxWrite is between
		t.Run(tc.name, func(t *testing.T) {
			server, client := tcpPair(t)
			smallBuffers(t, server, client)
			q := newQuietConn(server, 200*time.Millisecond)
			var stuck atomic.Bool
			defer time.AfterFunc(10*time.Second, func() { stuck.Store(true); server.Close() }).Stop()
			var err error
			for i := 0; i < 1000 && err == nil; i++ { // 32 MiB at most: far beyond any buffer
				_, err = q.Write(make([]byte, tc.size))
			}
			if stuck.Load() {
				t.Fatal("writes to a client that does not read went on for 10 s")
			}
			var ne net.Error
			if !errors.As(err, &ne) || !ne.Timeout() {
				t.Fatalf("write to a client that does not read: %v; want a timeout", err)
			}
		})
	}
}

func TestSendTimeoutSparesAClientThatReads(t *testing.T) {
	server, client := tcpPair(t)
	q := newQuietConn(server, 300*time.Millisecond).(*quietConn)
	// Writes that fill the buffers and wait, taken by the client well within the timeout.
	go func() {
		time.Sleep(100 * time.Millisecond)
		_, _ = io.Copy(io.Discard, client)
	}()
	waited := false
	for range 64 { // 16 MiB
		if _, err := q.Write(make([]byte, 256<<10)); err != nil {
			t.Fatalf("a write the client takes within the timeout: %v", err)
		}
		waited = waited || q.blocked
	}
	if !waited {
		t.Fatal("no write waited for room; the test proves nothing")
	}
	// The deadline of those waits is gone: a write long after them still goes out.
	time.Sleep(600 * time.Millisecond)
	if _, err := q.Write([]byte("later")); err != nil {
		t.Fatalf("a write after the timeout's length: %v (the wait's deadline was left)", err)
	}
}

// TestSendTimeoutFreesTheCell: a client that asks for a large answer and never reads is
// disconnected after the send timeout, and with it the request ends at the cell: its place
// among the cell's requests in flight and the cell's connection are free again, through the
// router's own loop and through net/http's server (HTTP/1.0 is handed to it).
func TestSendTimeoutFreesTheCell(t *testing.T) {
	ended := make(chan error, 2)
	chunk := make([]byte, 64<<10)
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		var err error
		for i := 0; i < 4096 && err == nil; i++ { // 256 MiB
			_, err = w.Write(chunk)
		}
		if err == nil {
			err = errors.New("the whole answer went out")
		}
		ended <- err
	}))
	rt, srv, ws := routeTo(t, backend, ServerConfig{SendTimeout: 300 * time.Millisecond})
	for _, proto := range []string{"HTTP/1.1", "HTTP/1.0"} {
		t.Run(proto, func(t *testing.T) {
			c, err := net.Dial("tcp", srv.Listener.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := io.WriteString(c, "GET /api/v1/workspaces/"+ws+"/assets/big "+proto+"\r\nHost: router\r\n\r\n"); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			select {
			case err := <-ended:
				t.Logf("the cell's handler ended after %v: %v", time.Since(start), err)
			case <-time.After(20 * time.Second):
				t.Fatal("20 s after the client stopped reading, the cell is still sending its answer")
			}
			cell := rt.cells.Load().byID["cell-a"]
			for i := 0; cell.inFlight.Load() != 0; i++ {
				if i == 100 {
					t.Fatalf("the cell still has %d requests in flight", cell.inFlight.Load())
				}
				time.Sleep(10 * time.Millisecond)
			}
			// The router closed the connection: once the client reads again it gets what the
			// buffers held, then the end (a close-delimited HTTP/1.0 answer looks complete; the
			// length tells).
			_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
			n, err := io.Copy(io.Discard, c)
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatalf("the connection stayed open after %d bytes", n)
			}
			if n >= 256<<20 {
				t.Fatalf("read %d bytes: the whole answer", n)
			}
			t.Logf("read %d bytes, then %v", n, err)
		})
	}
}
