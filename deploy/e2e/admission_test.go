package e2e

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"slidecells/shared/directory"
)

// fromAddr is a client whose connections come from the loopback address ip (127.0.0.0/8 is all
// loopback on Linux), so that the router sees distinct clients.
func fromAddr(ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DialContext: d.DialContext}}
}

// TestAdmissionFloodOfBogusTokens, through the router: many distinct bogus tokens naming the
// demo workspace from one address while its member keeps reading: the member gets no 429, the
// flood is answered 429 for its address (Retry-After) after a few 401s, another address is not
// affected, a client's own X-Forwarded-For does not change the address it is counted under, and
// a member flooding its own workspace is still held to the workspace's rate.
func TestAdmissionFloodOfBogusTokens(t *testing.T) {
	e := start(t, "", map[string][]string{"cell": {
		"CELL_RATE_WORKSPACE=1", "CELL_RATE_WORKSPACE_BURST=20",
		"CELL_RATE_AUTH_FAILURES=1", "CELL_RATE_AUTH_FAILURES_BURST=10",
	}})
	ws := e.demo.WorkspaceA
	get := func(c *http.Client, token string, hdr ...string) (int, http.Header) {
		req, _ := http.NewRequest(http.MethodGet, e.s.RouterURL+"/api/v1/projects", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("X-Workspace-ID", ws)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, resp.Header
	}
	bogus := func() string {
		b := make([]byte, 32)
		_, _ = rand.Read(b)
		return directory.TokenPrefix + base64.RawURLEncoding.EncodeToString(b)
	}
	attacker, member, bystander, forger := fromAddr("127.0.0.2"), fromAddr("127.0.0.3"), fromAddr("127.0.0.4"), fromAddr("127.0.0.5")
	var unauthorized, limited int
	for i := range 300 {
		switch st, h := get(attacker, bogus()); {
		case st == http.StatusUnauthorized:
			unauthorized++
		case st == http.StatusTooManyRequests && h.Get("X-RateLimit-Scope") == "address" && h.Get("Retry-After") != "":
			limited++
		default:
			t.Fatalf("bogus token: %d %v", st, h)
		}
		if i%20 == 0 {
			if st, h := get(member, e.demo.PAT); st != http.StatusOK {
				t.Fatalf("member read during the flood: %d %v", st, h)
			}
		}
	}
	if unauthorized < 10 || limited < 100 {
		t.Fatalf("flood: %d × 401, %d × 429", unauthorized, limited)
	}
	if st, h := get(bystander, bogus()); st != http.StatusUnauthorized {
		t.Fatalf("another address: %d %v", st, h)
	}
	// A client's X-Forwarded-For is dropped by the router: varying it does not escape the limit.
	limited = 0
	for i := range 40 {
		if st, _ := get(forger, bogus(), "X-Forwarded-For", fmt.Sprintf("192.0.2.%d", i)); st == http.StatusTooManyRequests {
			limited++
		}
	}
	if limited < 20 {
		t.Fatalf("forged X-Forwarded-For: only %d of 40 refused", limited)
	}
	// The member flooding its own workspace meets the workspace's limit.
	refused := 0
	for range 100 {
		if st, h := get(member, e.demo.PAT); st == http.StatusTooManyRequests && h.Get("X-RateLimit-Scope") == "workspace" {
			refused++
		}
	}
	if refused == 0 {
		t.Fatal("a member flooding its workspace was never refused")
	}
}
