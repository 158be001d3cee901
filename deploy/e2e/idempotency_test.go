package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"slidecells/shared/db/dbtest"
)

// projectsNamed counts a workspace's projects with a name, straight from the cell database.
func projectsNamed(t *testing.T, cellDBURL, ws, name string) int {
	t.Helper()
	var n int
	err := dbtest.Open(t, cellDBURL).Pool.QueryRow(context.Background(),
		`SELECT count(*) FROM projects WHERE workspace_id = $1 AND name = $2`, ws, name).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func (e *env) createProject(t *testing.T, ws, key, name string) answer {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"name": name})
	return e.do(t, http.MethodPost, "/api/v1/projects", e.demo.PAT, body,
		"X-Workspace-ID", ws, "Idempotency-Key", key, "Content-Type", "application/json")
}

// The cell is killed (SIGKILL, by a failpoint) after the create committed and before it
// answered. After a restart the retry replays the first answer: one project, not two.
func TestKilledBetweenCommitAndAnswerReplays(t *testing.T) {
	e := start(t, "", map[string][]string{"cell-a": {"CELL_FAILPOINTS=idempotency.after-commit=crash"}})
	ws := e.demo.WorkspaceA
	if a := e.createProject(t, ws, "kill-1", "survivor"); a.status < 500 {
		t.Fatalf("the cell answered although it was killed: %d %s", a.status, a.body)
	}
	cell := e.s.Cells["cell-a"]
	select {
	case <-cell.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("cell-a was not killed by the failpoint")
	}
	if n := projectsNamed(t, e.s.CellDBURL["cell-a"], ws, "survivor"); n != 1 {
		t.Fatalf("%d projects committed before the kill, want 1", n)
	}
	cell.Unsetenv("CELL_FAILPOINTS")
	if err := cell.Start(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cell.WaitLive(ctx, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	var a answer
	for ctx.Err() == nil { // the router's breaker may still hold the restarted cell off
		if a = e.createProject(t, ws, "kill-1", "survivor"); a.status < 500 {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if a.status != http.StatusCreated {
		t.Fatalf("retry: %d %s", a.status, a.body)
	}
	if a.header.Get("Idempotency-Replayed") != "true" {
		t.Fatalf("retry ran again instead of replaying: %v", a.header)
	}
	if n := projectsNamed(t, e.s.CellDBURL["cell-a"], ws, "survivor"); n != 1 {
		t.Fatalf("%d projects after the retry, want 1", n)
	}
}

// Sixteen clients with a hundred distinct keys each through the router, on both cells: no
// server error, every key replays afterwards. Then sixteen clients with one key: exactly one
// project, one answer for all.
func TestConcurrentIdempotentCreatesThroughTheRouter(t *testing.T) {
	e := start(t, "", nil)
	const clients, perClient = 16, 100
	type fail struct {
		key string
		a   answer
	}
	fails := make(chan fail, clients*perClient)
	var wg sync.WaitGroup
	c := &http.Client{Timeout: 30 * time.Second}
	post := func(ws, key, name string) answer {
		body, _ := json.Marshal(map[string]string{"name": name})
		req, _ := http.NewRequest(http.MethodPost, e.s.RouterURL+"/api/v1/projects", strings.NewReader(string(body)))
		req.Header.Set("Authorization", "Bearer "+e.demo.PAT)
		req.Header.Set("X-Workspace-ID", ws)
		req.Header.Set("Idempotency-Key", key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := c.Do(req)
		if err != nil {
			return answer{status: 599, body: []byte(err.Error())}
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return answer{status: resp.StatusCode, header: resp.Header, body: b}
	}
	workspaces := []string{e.demo.WorkspaceA, e.demo.WorkspaceB}
	for cl := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ws := workspaces[cl%2]
			for i := range perClient {
				key := fmt.Sprintf("c%d-%d", cl, i)
				if a := post(ws, key, "load"); a.status != http.StatusCreated {
					fails <- fail{key, a}
				}
			}
		}()
	}
	wg.Wait()
	close(fails)
	n := 0
	for f := range fails {
		if n++; n <= 3 {
			t.Errorf("%s: %d %s", f.key, f.a.status, f.a.body)
		}
	}
	if n > 0 {
		t.Fatalf("%d of %d creates failed", n, clients*perClient)
	}
	total := projectsNamed(t, e.s.CellDBURL["cell-a"], e.demo.WorkspaceA, "load") +
		projectsNamed(t, e.s.CellDBURL["cell-b"], e.demo.WorkspaceB, "load")
	if total != clients*perClient {
		t.Fatalf("%d projects, want %d", total, clients*perClient)
	}
	for cl := range clients {
		a := post(workspaces[cl%2], fmt.Sprintf("c%d-%d", cl, cl), "load")
		if a.header.Get("Idempotency-Replayed") != "true" {
			t.Fatalf("key c%d-%d does not replay: %d %s", cl, cl, a.status, a.body)
		}
	}

	// One key, sixteen clients, each retrying while the first is in flight.
	answers := make(chan string, clients)
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			deadline := time.Now().Add(30 * time.Second)
			for time.Now().Before(deadline) {
				a := post(e.demo.WorkspaceA, "single", "single")
				if a.status == http.StatusConflict && a.header.Get("Retry-After") != "" {
					time.Sleep(20 * time.Millisecond)
					continue
				}
				answers <- fmt.Sprintf("%d %s", a.status, a.body)
				return
			}
			answers <- "timeout"
		}()
	}
	wg.Wait()
	close(answers)
	first := ""
	for a := range answers {
		if first == "" {
			first = a
		}
		if a != first || !strings.HasPrefix(a, "201 ") {
			t.Fatalf("answers differ or failed: %q vs %q", a, first)
		}
	}
	if n := projectsNamed(t, e.s.CellDBURL["cell-a"], e.demo.WorkspaceA, "single"); n != 1 {
		t.Fatalf("%d projects for one key, want 1", n)
	}
}
