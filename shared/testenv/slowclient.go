package testenv

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
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

// Answer is what a raw connection got back: the answer's status and body, and whether the
// server then closed the connection (the next read ended with EOF).
type Answer struct {
	Status int
	Body   []byte
	Closed bool
}

// ReadAnswer reads one HTTP answer from conn within limit (the test's own bound: a connection
// the server never answers or never closes fails here, not forever), then reads once more to
// see whether the server closed the connection after it.
func ReadAnswer(conn net.Conn, limit time.Duration) (Answer, error) {
	_ = conn.SetReadDeadline(time.Now().Add(limit))
	br := bufio.NewReader(conn)
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		return Answer{}, err
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	_, err = br.ReadByte()
	return Answer{Status: res.StatusCode, Body: body, Closed: errors.Is(err, io.EOF)}, nil
}
