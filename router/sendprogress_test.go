package router

import (
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// steadyReader reads from c every 20 ms, step bytes at a time, until stop is closed; it
// counts what it read.
func steadyReader(c net.Conn, step int, stop <-chan struct{}, read *atomic.Int64) {
	buf := make([]byte, step)
	tk := time.NewTicker(20 * time.Millisecond)
	defer tk.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tk.C:
		}
		n, err := c.Read(buf)
		read.Add(int64(n))
		if err != nil {
			return
		}
	}
}

// sendPair is a connection whose server side has a fixed send buffer of 2 MiB (what
// autotuning reaches on a fast path; the kernel wakes a writer waiting for room only once a
// third of it is free) and whose client side has a small receive buffer, so the client's
// reads pace what the server's socket takes.
func sendPair(t *testing.T) (*quietConn, net.Conn) {
	t.Helper()
	server, client := tcpPair(t)
	if err := server.(*net.TCPConn).SetWriteBuffer(1 << 20); err != nil { // doubled by the kernel
		t.Fatal(err)
	}
	if err := client.(*net.TCPConn).SetReadBuffer(64 << 10); err != nil {
		t.Fatal(err)
	}
	return newQuietConn(server, 500*time.Millisecond).(*quietConn), client
}

// TestSendTimeoutSparesAClientThatReadsSteadily: a client that reads its answer steadily at
// 400 KiB/s (200 KiB per send timeout of 500 ms, six times minSendProgress) is never cut,
// though it frees a third of the send buffer (about 700 KiB) only every 2 s or so: the
// deadline of a wait that finds the client taking the answer is moved on. Through raw writes
// (the proxy's 32 KiB) and a larger one's, written in pieces of rawio.MaxWrite.
func TestSendTimeoutSparesAClientThatReadsSteadily(t *testing.T) {
	for _, tc := range []struct {
		name string
		size int
	}{{"raw", 32 << 10}, {"in pieces of rawio.MaxWrite", 1 << 20}} {
		t.Run(tc.name, func(t *testing.T) {
			q, client := sendPair(t)
			stop := make(chan struct{})
			defer close(stop)
			var read atomic.Int64
			go steadyReader(client, 8<<10, stop, &read)
			start := time.Now()
			total, waited := 0, false
			for time.Since(start) < 2*time.Second {
				n, err := q.Write(make([]byte, tc.size))
				total += n
				waited = waited || q.blocked
				if err != nil {
					t.Fatalf("cut after %v: wrote %d bytes, the client read %d (%.0f KiB/s): %v",
						time.Since(start), total, read.Load(), float64(read.Load())/1024/time.Since(start).Seconds(), err)
				}
			}
			if tc.size <= 256<<10 && !waited {
				t.Fatal("no write waited for room; the test proves nothing")
			}
			t.Logf("wrote %d bytes in %v; the client read %d", total, time.Since(start), read.Load())
		})
	}
}

// TestSendTimeoutCutsAClientThatTrickles: a client that takes less than minSendProgress per
// send timeout (10 KiB/s here: 5 KiB per 500 ms) is cut, as one that does not read at all.
func TestSendTimeoutCutsAClientThatTrickles(t *testing.T) {
	q, client := sendPair(t)
	stop := make(chan struct{})
	defer close(stop)
	var read atomic.Int64
	go steadyReader(client, 200, stop, &read)
	start := time.Now()
	var err error
	for time.Since(start) < 20*time.Second && err == nil {
		_, err = q.Write(make([]byte, 32<<10))
	}
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("a client trickling at 10 KiB/s for %v: %v; want a timeout", time.Since(start), err)
	}
	t.Logf("cut after %v; the client had read %d bytes", time.Since(start), read.Load())
}
