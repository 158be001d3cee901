package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"slidecells/shared/testenv"
)

// TestSlowClientsOnTheCell: the cell bounds slow bodies by itself (the router's rule,
// httpserve.BodyRate), for a client that reaches it without the router — another pod, a
// misrouted proxy. Ten connections declare a 1,000-byte project body and send 8 bytes with a
// member's token (answered 408 once the grace passes), ten more do so without a token
// (answered 401 at once); every one of them is closed, and meanwhile other clients are served
// both directly and through the router.
func TestSlowClientsOnTheCell(t *testing.T) {
	e := start(t, "", map[string][]string{"cell": {"CELL_BODY_TIMEOUT=2s"}})
	ws := e.demo.WorkspaceA
	addr := strings.TrimPrefix(e.s.Cells["cell-a"].URL, "http://")

	type outcome struct {
		status int
		closed bool
		err    error
	}
	slow := func(i int, header ...string) outcome {
		c, err := testenv.SlowRequest(addr, http.MethodPost, "/api/v1/projects", "cell.test", 1000,
			append([]string{"Idempotency-Key", fmt.Sprintf("slow-%d", i)}, header...)...)
		if err != nil {
			return outcome{err: err}
		}
		defer c.Close()
		a, err := testenv.ReadAnswer(c, 60*time.Second) // closed: the cell's EOF, not the test's deadline
		return outcome{status: a.Status, closed: a.Closed, err: err}
	}
	const n = 10
	results := make([]outcome, 2*n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			results[i] = slow(i, "Authorization", "Bearer "+e.demo.PAT, "X-Workspace-ID", ws)
		})
		wg.Go(func() { results[n+i] = slow(n+i, "X-Workspace-ID", ws) })
	}
	// Meanwhile others are served, directly and through the router.
	for i := range 10 {
		if a := e.get(t, "/api/v1/projects", e.demo.PAT, "X-Workspace-ID", ws); a.status != http.StatusOK {
			t.Fatalf("a normal client through the router (%d): %d %s", i, a.status, a.body)
		}
		req, _ := http.NewRequest(http.MethodGet, e.s.Cells["cell-a"].URL+"/api/v1/projects", nil)
		req.Header.Set("Authorization", "Bearer "+e.demo.PAT)
		req.Header.Set("X-Workspace-ID", ws)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("a normal client of the cell (%d): %v", i, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("a normal client of the cell (%d): %d", i, resp.StatusCode)
		}
	}
	wg.Wait()
	for i, o := range results {
		want := http.StatusRequestTimeout
		if i >= n {
			want = http.StatusUnauthorized
		}
		if o.err != nil || o.status != want || !o.closed {
			t.Errorf("slow client %d: %+v, want %d and the connection closed", i, o, want)
		}
	}
}
