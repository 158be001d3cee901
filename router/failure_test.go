package router

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sony/gobreaker/v2"

	"slidecells/router/placement"
	"slidecells/shared/cellproto"
	"slidecells/shared/ids"
	"slidecells/shared/problem"
	"slidecells/shared/testenv"
)

func (b *bundle) breakerState(id string) gobreaker.State {
	return b.rt.cells.Load().byID[id].breaker.State()
}

func TestCellDownFailsFastWhileOtherCellServes(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *Config) { c.BreakerFailures = 3 })
	b.a.srv.Close() // connection refused from now on

	for i := range 3 {
		a := b.get(t, "/api/v1/workspaces/"+b.wsA)
		a.wantProblem(t, http.StatusServiceUnavailable, problem.CellUnavailable)
		if a.header.Get(cellproto.HeaderCellID) != "cell-a" || a.header.Get("Retry-After") == "" {
			t.Errorf("attempt %d: X-Cell-ID %q Retry-After %q", i, a.header.Get(cellproto.HeaderCellID), a.header.Get("Retry-After"))
		}
		b.get(t, "/api/v1/workspaces/"+b.wsB).wantCell(t, "cell-b")
	}
	if st := b.breakerState("cell-a"); st != gobreaker.StateOpen {
		t.Fatalf("cell-a breaker %v after 3 refused connections, want open", st)
	}
	if st := b.breakerState("cell-b"); st != gobreaker.StateClosed {
		t.Errorf("cell-b breaker %v, want closed", st)
	}
	a := b.get(t, "/api/v1/workspaces/"+b.wsA)
	a.wantProblem(t, http.StatusServiceUnavailable, problem.CellUnavailable)
	if !a.problem.Retryable || a.header.Get("Retry-After") == "" {
		t.Errorf("open breaker answer: retryable %v, Retry-After %q", a.problem.Retryable, a.header.Get("Retry-After"))
	}
	// Routes without a workspace avoid the open cell.
	for range 4 {
		b.get(t, "/api/v1/system/version").wantCell(t, "cell-b")
	}
}

func TestCellAnswersAreNotBreakerFailures(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *Config) { c.BreakerFailures = 1 })
	b.a.unhost(b.wsA)
	for range 3 {
		b.get(t, "/api/v1/workspaces/"+b.wsA).wantProblem(t, http.StatusServiceUnavailable, problem.ServiceUnavailable)
	}
	unknown := "/api/v1/workspaces/ws_" + "aaaaaaaaaaaaaaaaaaaaaaaaaa"
	b.get(t, unknown).wantProblem(t, http.StatusNotFound, problem.NotFound)
	if st := b.breakerState("cell-a"); st != gobreaker.StateClosed {
		t.Fatalf("breaker %v after the cell's own 421/404 answers, want closed", st)
	}
}

func TestFrozenCellDoesNotDelayOtherCell(t *testing.T) {
	t.Parallel()
	b := setup(t) // CellTimeout 30s: the frozen requests stay in flight
	release := make(chan struct{})
	entered := make(chan struct{}, 8)
	b.a.mu.Lock()
	b.a.block, b.a.entered = release, entered
	b.a.mu.Unlock()

	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			res, err := testClient.Get(b.srv.URL + "/api/v1/workspaces/" + b.wsA)
			if err != nil {
				t.Error(err)
				return
			}
			res.Body.Close()
		})
	}
	for i := range 4 {
		select {
		case <-entered:
		case <-time.After(10 * time.Second):
			t.Fatalf("only %d of 4 requests reached the frozen cell within 10s", i)
		}
	}
	// Four requests hang inside cell-a; cell-b answers meanwhile.
	for range 10 {
		b.get(t, "/api/v1/workspaces/"+b.wsB).wantCell(t, "cell-b")
	}
	close(release)
	waitGroup(t, &wg, 10*time.Second)
}

func TestFrozenCellTimesOutAndBreakerOpens(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *Config) {
		c.CellTimeout = 20 * time.Millisecond
		c.BreakerFailures = 2
	})
	release := make(chan struct{})
	defer close(release)
	b.a.mu.Lock()
	b.a.block = release // no answer until the router gives up
	b.a.mu.Unlock()

	for range 2 {
		b.get(t, "/api/v1/workspaces/"+b.wsA).wantProblem(t, http.StatusServiceUnavailable, problem.CellUnavailable)
	}
	if st := b.breakerState("cell-a"); st != gobreaker.StateOpen {
		t.Fatalf("breaker %v after 2 timeouts, want open", st)
	}
	hits := b.a.hits.Load()
	for range 5 {
		b.get(t, "/api/v1/workspaces/"+b.wsA).wantProblem(t, http.StatusServiceUnavailable, problem.CellUnavailable)
	}
	if n := b.a.hits.Load() - hits; n != 0 {
		t.Errorf("the frozen cell received %d requests after its breaker opened, want 0", n)
	}
	b.get(t, "/api/v1/workspaces/"+b.wsB).wantCell(t, "cell-b")
}

func TestProbesMarkCellUnhealthy(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.a.setReady(http.StatusServiceUnavailable)
	b.rt.ProbeCells(context.Background())
	// One failed probe is not enough (ProbeFailures = 2).
	b.get(t, "/api/v1/workspaces/"+b.wsA).wantCell(t, "cell-a")
	b.rt.ProbeCells(context.Background())

	hits := b.a.hits.Load()
	b.get(t, "/api/v1/workspaces/"+b.wsA).wantProblem(t, http.StatusServiceUnavailable, problem.CellUnavailable)
	for range 4 {
		b.get(t, "/api/v1/system/version").wantCell(t, "cell-b")
	}
	if n := b.a.hits.Load() - hits; n != 0 {
		t.Errorf("unhealthy cell received %d requests", n)
	}

	b.a.setReady(http.StatusOK)
	b.rt.ProbeCells(context.Background())
	b.get(t, "/api/v1/workspaces/"+b.wsA).wantCell(t, "cell-a")
}

// When no cell answers its probe in time, the router does not mark them all down at once: that
// is what a stall of its own process or machine looks like, and every tenant would get 503.
// Timeouts that go on are counted again, so cells that all stopped answering are still cut off.
func TestProbeTimeoutsOfEveryCellAreDiscountedForAWhile(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *Config) { c.ProbeTimeout = 50 * time.Millisecond }) // ProbeFailures 2
	const discounted = "not counting the timeouts against the cells"
	b.a.setHangs(true)
	b.b.setHangs(true)
	b.rt.ProbeCells(context.Background())
	if r := b.rt.Readiness(); !r.Ready || r.ProbeRoundsUnanswered != 1 {
		t.Errorf("after one round without an answer: %+v, want ready with 1 round unanswered", r)
	}
	b.rt.ProbeCells(context.Background())
	b.get(t, "/api/v1/workspaces/"+b.wsA).wantCell(t, "cell-a")
	b.get(t, "/api/v1/workspaces/"+b.wsB).wantCell(t, "cell-b")
	// The cells serve on, but a router that has reached no cell for ProbeFailures rounds leaves
	// its load balancer: it may be the one cut off.
	if r := b.rt.Readiness(); r.CellsServing != 2 || r.Ready || r.ProbeRoundsUnanswered != 2 {
		t.Errorf("after two rounds in which every probe timed out: %+v, want 2 cells serving, not ready, 2 rounds unanswered", r)
	}
	const two = "router_probe_rounds_inconclusive_total 2\n"
	if m := b.metrics(t); !strings.Contains(m, two) {
		t.Errorf("metrics do not count 2 discounted rounds:\n%s", grepLines(m, "router_probe"))
	}
	if n := b.logs.FilterMessageSnippet(discounted).Len(); n != 1 {
		t.Errorf("logged the discounted rounds %d times, want once", n)
	}

	// Two more rounds: the timeouts count again, and ProbeFailures of them mark both cells down.
	b.rt.ProbeCells(context.Background())
	b.get(t, "/api/v1/workspaces/"+b.wsA).wantCell(t, "cell-a")
	b.rt.ProbeCells(context.Background())
	b.get(t, "/api/v1/workspaces/"+b.wsA).wantProblem(t, http.StatusServiceUnavailable, problem.CellUnavailable)
	b.get(t, "/api/v1/workspaces/"+b.wsB).wantProblem(t, http.StatusServiceUnavailable, problem.CellUnavailable)
	if m := b.metrics(t); !strings.Contains(m, two) {
		t.Errorf("metrics count more than 2 discounted rounds:\n%s", grepLines(m, "router_probe"))
	}
	if n := b.logs.FilterMessageSnippet("counting the timeouts against the cells again").Len(); n != 1 {
		t.Errorf("logged the end of the discount %d times, want once", n)
	}

	// One cell answering again: it serves, the router is ready, and the other's timeouts count
	// at once.
	b.b.setHangs(false)
	b.rt.ProbeCells(context.Background())
	if r := b.rt.Readiness(); !r.Ready || r.ProbeRoundsUnanswered != 0 || r.CellsServing != 1 {
		t.Errorf("after a round in which cell-b answered: %+v, want ready, 0 rounds unanswered, 1 cell serving", r)
	}
	b.get(t, "/api/v1/workspaces/"+b.wsB).wantCell(t, "cell-b")
	b.get(t, "/api/v1/workspaces/"+b.wsA).wantProblem(t, http.StatusServiceUnavailable, problem.CellUnavailable)
	if n := b.logs.FilterMessageSnippet("the router is ready").Len(); n != 1 {
		t.Errorf("logged the recovery %d times, want once", n)
	}

	// A new episode is discounted again, and logged again once a minute has passed.
	b.b.setHangs(true)
	b.rt.ProbeCells(context.Background())
	b.rt.ProbeCells(context.Background())
	b.get(t, "/api/v1/workspaces/"+b.wsB).wantCell(t, "cell-b")
	if n := b.logs.FilterMessageSnippet(discounted).Len(); n != 1 {
		t.Errorf("logged discounted rounds %d times within a minute, want once", n)
	}
	b.b.setHangs(false)
	b.rt.ProbeCells(context.Background())
	b.b.setHangs(true)
	b.clock.Advance(time.Minute)
	b.rt.ProbeCells(context.Background())
	if n := b.logs.FilterMessageSnippet(discounted).Len(); n != 2 {
		t.Errorf("logged discounted rounds %d times, want twice a minute apart", n)
	}
}

// A cell that answers in time, even 503, shows the router reaching its cells: another cell's
// timeout then counts.
func TestATimelyAnswerMakesTimeoutsCount(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *Config) { c.ProbeTimeout = 50 * time.Millisecond })
	b.a.setReady(http.StatusServiceUnavailable)
	b.b.setHangs(true)
	b.rt.ProbeCells(context.Background())
	b.rt.ProbeCells(context.Background())
	b.get(t, "/api/v1/workspaces/"+b.wsA).wantProblem(t, http.StatusServiceUnavailable, problem.CellUnavailable)
	b.get(t, "/api/v1/workspaces/"+b.wsB).wantProblem(t, http.StatusServiceUnavailable, problem.CellUnavailable)
	if r := b.rt.Readiness(); r.ProbeRoundsUnanswered != 0 {
		t.Errorf("rounds unanswered %d with cell-a answering, want 0", r.ProbeRoundsUnanswered)
	}
}

// A refused connection is no answer (nothing shows the router reaching its cells), but it is
// a failure of its own cell, never discounted.
func TestRefusedConnectionsCountInADiscountedRound(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *Config) { c.ProbeTimeout = 50 * time.Millisecond })
	b.a.srv.Close()
	b.b.setHangs(true)
	b.rt.ProbeCells(context.Background())
	b.rt.ProbeCells(context.Background())
	b.get(t, "/api/v1/workspaces/"+b.wsA).wantProblem(t, http.StatusServiceUnavailable, problem.CellUnavailable)
	b.get(t, "/api/v1/workspaces/"+b.wsB).wantCell(t, "cell-b")
}

// A round that ran late (the router's clock moved on while it waited, as in a stall of its
// process) discounts its timeouts although another cell passed: answers waiting in the
// router's sockets were read too late.
func TestALateRoundDiscountsItsTimeouts(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *Config) { c.ProbeTimeout = 50 * time.Millisecond })
	b.a.mu.Lock()
	b.a.onReady = func() { b.clock.Advance(2 * time.Second) } // the round takes 2 s by the router's clock
	b.a.mu.Unlock()
	b.b.setHangs(true)
	b.rt.ProbeCells(context.Background())
	b.rt.ProbeCells(context.Background())
	b.get(t, "/api/v1/workspaces/"+b.wsB).wantCell(t, "cell-b")
	if r := b.rt.Readiness(); !r.Ready || r.ProbeRoundsUnanswered != 0 {
		t.Errorf("after late rounds in which cell-a passed: %+v, want ready, 0 rounds unanswered", r)
	}
	// Rounds on time: cell-b's timeouts count.
	b.a.mu.Lock()
	b.a.onReady = nil
	b.a.mu.Unlock()
	b.rt.ProbeCells(context.Background())
	b.rt.ProbeCells(context.Background())
	b.get(t, "/api/v1/workspaces/"+b.wsB).wantProblem(t, http.StatusServiceUnavailable, problem.CellUnavailable)
	b.get(t, "/api/v1/workspaces/"+b.wsA).wantCell(t, "cell-a")
}

// Cells that all refuse connections are marked down as before: nothing is discounted.
func TestAllCellsRefusingAreMarkedDown(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *Config) { c.ProbeTimeout = 50 * time.Millisecond })
	b.a.srv.Close()
	b.b.srv.Close()
	b.rt.ProbeCells(context.Background())
	b.rt.ProbeCells(context.Background())
	if r := b.rt.Readiness(); r.CellsServing != 0 || r.Ready {
		t.Errorf("after two rounds of refused connections: %+v, want no cell serving, not ready", r)
	}
	if m := b.metrics(t); !strings.Contains(m, "router_probe_rounds_inconclusive_total 0\n") {
		t.Errorf("refused connections were discounted:\n%s", grepLines(m, "router_probe"))
	}
}

// A round ends with its context (the router closing), and its cancelled probes say nothing.
func TestAProbeRoundEndsWithItsContext(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *Config) { c.ProbeTimeout = time.Minute })
	b.a.setHangs(true)
	b.b.setHangs(true)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	done := make(chan struct{})
	go func() { b.rt.ProbeCells(ctx); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the round did not end with its context (ProbeTimeout 1 min)")
	}
	if r := b.rt.Readiness(); !r.Ready || r.ProbeRoundsUnanswered != 0 || r.CellsServing != 2 {
		t.Errorf("after a cancelled round: %+v, want it to count for nothing", r)
	}
}

func TestProberRunsInBackground(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *Config) {
		c.ProbeInterval = 5 * time.Millisecond
		c.ProbeFailures = 1
	})
	b.a.setReady(http.StatusServiceUnavailable)
	// Wait for the background prober (every 5 ms); the bound only catches a prober that
	// never runs.
	testenv.Eventually(t, 10*time.Second, time.Millisecond, "the prober marks cell-a unhealthy", func() error {
		if b.rt.cells.Load().byID["cell-a"].healthy.Load() {
			return errors.New("cell-a still healthy")
		}
		return nil
	})
	b.get(t, "/api/v1/workspaces/"+b.wsA).wantProblem(t, http.StatusServiceUnavailable, problem.CellUnavailable)
}

func TestDirectoryDownServesCachedPlacementsUntilMaxStale(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.get(t, "/api/v1/workspaces/"+b.wsA).wantCell(t, "cell-a")
	b.dir.setErr(errors.New("directory unreachable"))

	b.clock.Advance(31 * time.Second) // past TTL: refresh fails, the stale entry is used
	lookups := b.dir.lookups.Load()
	b.get(t, "/api/v1/workspaces/"+b.wsA).wantCell(t, "cell-a")
	if b.dir.lookups.Load() != lookups+1 {
		t.Errorf("a stale entry was not refreshed from the directory")
	}
	// Within StaleRetry the directory is not asked again.
	b.get(t, "/api/v1/workspaces/"+b.wsA).wantCell(t, "cell-a")
	if b.dir.lookups.Load() != lookups+1 {
		t.Errorf("the failing directory was asked again within StaleRetry")
	}

	b.clock.Advance(4*time.Minute + 20*time.Second) // 4m51s after the last good answer
	b.get(t, "/api/v1/workspaces/"+b.wsA).wantCell(t, "cell-a")

	// A workspace never cached cannot be served.
	b.get(t, "/api/v1/workspaces/"+b.wsB).wantProblem(t, http.StatusServiceUnavailable, problem.DirectoryUnavailable)

	b.clock.Advance(10 * time.Second) // past MaxStale
	a := b.get(t, "/api/v1/workspaces/"+b.wsA)
	a.wantProblem(t, http.StatusServiceUnavailable, problem.DirectoryUnavailable)
	if a.header.Get("Retry-After") == "" {
		t.Errorf("no Retry-After")
	}

	b.dir.setErr(nil)
	b.get(t, "/api/v1/workspaces/"+b.wsA).wantCell(t, "cell-a")
}

func TestPlacementOnNewCellRereadsCellList(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := newFakeCell(t, "cell-c")
	ws := b.wsA
	c.host(ws, 5)
	b.dir.mu.Lock()
	b.dir.cells = append(b.dir.cells, Cell{ID: "cell-c", URL: c.srv.URL, State: CellActive})
	b.dir.placements[ws] = placement.Placement{CellID: "cell-c", Epoch: 5}
	b.dir.mu.Unlock()
	a := b.get(t, "/api/v1/workspaces/"+ws)
	if a.status != http.StatusOK || a.cell != "cell-c" {
		t.Fatalf("got %d from %q, want 200 from the newly listed cell-c", a.status, a.cell)
	}
}

// TestInFlightBoundShedsLoad: with a cell's in-flight bound filled by requests its slow
// backend holds, the next request to that cell is shed at once with 503 CELL_OVERLOADED and
// Retry-After, counted in router_shed_total, while another cell's requests pass; once the
// held requests finish the cell is served again.
func TestInFlightBoundShedsLoad(t *testing.T) {
	t.Parallel()
	const bound = 4
	b := setup(t, func(c *Config) { c.MaxInFlightPerCell = bound })
	b.a.mu.Lock()
	b.a.block, b.a.entered = make(chan struct{}), make(chan struct{}, bound)
	b.a.mu.Unlock()
	var wg sync.WaitGroup
	statuses := make(chan int, bound)
	for range bound {
		wg.Go(func() { statuses <- b.get(t, "/api/v1/workspaces/"+b.wsA).status })
	}
	for range bound {
		<-b.a.entered
	}
	a := b.get(t, "/api/v1/workspaces/"+b.wsA)
	a.wantProblem(t, http.StatusServiceUnavailable, problem.CellOverloaded)
	if a.header.Get("Retry-After") != "1" || a.header.Get(cellproto.HeaderCellID) != "cell-a" {
		t.Errorf("shed answer headers %v", a.header)
	}
	b.get(t, "/api/v1/workspaces/"+b.wsB).wantCell(t, "cell-b")
	if n := b.a.hits.Load(); n != bound {
		t.Errorf("cell-a received %d requests, want the %d held (the shed one must not reach it)", n, bound)
	}
	b.releaseHeld(t, &wg, statuses)
	raw := b.metrics(t)
	for _, want := range []string{`router_shed_total{cell="cell-a"} 1`, `router_cell_in_flight{cell="cell-a"} 0`, `router_cell_breaker_state{cell="cell-a"} 0`} {
		if !strings.Contains(raw, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

// TestWorkspaceShareOfACell: a workspace with MaxInFlightPerWorkspace requests held by its slow
// cell gets 429 RATE_LIMITED (Retry-After, X-RateLimit-Scope: workspace) for its next one at
// once, counted in router_workspace_shed_total and never sent to the cell; another workspace on
// the same cell still reaches it; once the held requests finish the workspace is served again
// and nothing of the count is left.
func TestWorkspaceShareOfACell(t *testing.T) {
	t.Parallel()
	const share = 3
	b := setup(t, func(c *Config) { c.MaxInFlightPerWorkspace = share })
	wsC := ids.New(ids.Workspace) // a second workspace on cell-a
	b.dir.place(wsC, "cell-a", 1)
	b.a.host(wsC, 1)
	b.a.mu.Lock()
	b.a.block, b.a.entered = make(chan struct{}), make(chan struct{}, share+1)
	b.a.mu.Unlock()
	var wg sync.WaitGroup
	statuses := make(chan int, share+1)
	for range share {
		wg.Go(func() { statuses <- b.get(t, "/api/v1/workspaces/"+b.wsA).status })
	}
	for range share {
		<-b.a.entered
	}
	a := b.get(t, "/api/v1/workspaces/"+b.wsA+"/projects")
	a.wantProblem(t, http.StatusTooManyRequests, problem.RateLimited)
	if a.header.Get("Retry-After") != "1" || a.header.Get("X-RateLimit-Scope") != "workspace" {
		t.Errorf("refused answer headers %v", a.header)
	}
	if n := b.a.hits.Load(); n != share {
		t.Errorf("cell-a received %d requests, want the %d held (the refused one must not reach it)", n, share)
	}
	// The other tenant of the cell is not refused: its request reaches the cell.
	wg.Go(func() { statuses <- b.get(t, "/api/v1/workspaces/"+wsC).status })
	select {
	case <-b.a.entered:
	case <-time.After(time.Minute):
		t.Fatal("another workspace's request did not reach the cell")
	}
	if got := b.rt.share.inFlight(b.wsA); got != share {
		t.Errorf("%d of the workspace's requests counted in flight, want %d", got, share)
	}
	b.releaseHeld(t, &wg, statuses)
	if n := b.rt.share.len(); n != 0 {
		t.Errorf("%d workspaces still counted after every request ended", n)
	}
	raw := b.metrics(t)
	for _, want := range []string{`router_workspace_shed_total{cell="cell-a"} 1`, `router_shed_total{cell="cell-a"} 0`, `router_cell_in_flight{cell="cell-a"} 0`} {
		if !strings.Contains(raw, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

// releaseHeld lets cell-a answer the requests it holds (b.a.block), checks that each of them,
// sent by wg's goroutines, was answered 200 on statuses, and that cell-a serves wsA again.
func (b *bundle) releaseHeld(t *testing.T, wg *sync.WaitGroup, statuses chan int) {
	t.Helper()
	close(b.a.block)
	waitGroup(t, wg, time.Minute)
	close(statuses)
	for st := range statuses {
		if st != http.StatusOK {
			t.Errorf("held request answered %d", st)
		}
	}
	b.a.mu.Lock()
	b.a.block = nil
	b.a.mu.Unlock()
	b.get(t, "/api/v1/workspaces/"+b.wsA).wantCell(t, "cell-a")
}

// metrics is the router's /metrics text.
func (b *bundle) metrics(t *testing.T) string {
	t.Helper()
	res, err := testClient.Get(b.ops.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	return string(raw)
}
