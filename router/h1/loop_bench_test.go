package h1

import (
	"bufio"
	"bytes"
	"net"
	"net/http"
	"testing"
)

// BenchmarkLoop measures one keep-alive request through the loop, the handler writing an
// 82-byte JSON answer with its Content-Length, the client a raw connection that allocates
// nothing: allocs/op are the loop's own. Compare with -bench Loop/net-http, the same through
// net/http's server.
func BenchmarkLoop(b *testing.B) {
	body := bytes.Repeat([]byte("x"), 82)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header()["Content-Type"] = []string{"application/json"}
		w.Header()["Content-Length"] = []string{"82"}
		_, _ = w.Write(body)
	})
	for _, tc := range []struct {
		name  string
		serve func(net.Listener) func()
	}{
		{"h1", func(ln net.Listener) func() {
			s := &Server{Handler: h}
			go func() { _ = s.Serve(ln) }()
			return func() { _ = s.Close() }
		}},
		{"net-http", func(ln net.Listener) func() {
			s := &http.Server{Handler: h}
			go func() { _ = s.Serve(ln) }()
			return func() { _ = s.Close() }
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			stop := tc.serve(ln)
			defer stop()
			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			req := []byte("GET /api/v1/workspaces/ws_0123456789abcdef0123456789/projects?limit=10 HTTP/1.1\r\nHost: router.test\r\nUser-Agent: bench\r\nAccept: */*\r\nX-Workspace-ID: ws_0123456789abcdef0123456789\r\nAuthorization: Bearer sk_test_0123456789\r\n\r\n")
			br := bufio.NewReaderSize(c, 4096)
			read := func() {
				// The head, then the 82-byte body.
				for {
					line, err := br.ReadSlice('\n')
					if err != nil {
						b.Fatal(err)
					}
					if len(line) == 2 {
						break
					}
				}
				if _, err := br.Discard(82); err != nil {
					b.Fatal(err)
				}
			}
			if _, err := c.Write(req); err != nil {
				b.Fatal(err)
			}
			read()
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if _, err := c.Write(req); err != nil {
					b.Fatal(err)
				}
				read()
			}
		})
	}
}
