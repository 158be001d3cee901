package testenv

import (
	"fmt"
	"io"
	"net"
	"strings"
)

// SlowRequest opens a connection to addr and sends a request head declaring a JSON body of
// length bytes, then only its first 8 bytes ({"name":): a client holding its body back. header
// is name, value pairs. The caller reads the answer and closes the connection.
func SlowRequest(addr, method, path, host string, length int, header ...string) (net.Conn, error) {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "%s %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n", method, path, host, length)
	for i := 0; i+1 < len(header); i += 2 {
		fmt.Fprintf(&sb, "%s: %s\r\n", header[i], header[i+1])
	}
	sb.WriteString("\r\n{\"name\":")
	if _, err := io.WriteString(conn, sb.String()); err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}
