package renderer

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"slidecells/renderer/internal/fixture"
	rc "slidecells/shared/rendercontract"
)

// longPoll is one receipt query with the long-poll parameters, and how long its answer took.
func (e *env) longPoll(id string, state rc.AttemptState, waitMS int) (rc.Receipt, time.Duration) {
	e.t.Helper()
	began := time.Now()
	st, b, _ := e.do("GET", fmt.Sprintf("%s/executions/%s?state=%s&wait_ms=%d", rc.APIRoot, id, state, waitMS), nil)
	took := time.Since(began)
	if st != http.StatusOK {
		e.t.Fatalf("long-poll of %s in %s = %d %s", id, state, st, b)
	}
	var rec rc.Receipt
	if err := json.Unmarshal(b, &rec); err != nil {
		e.t.Fatal(err)
	}
	return rec, took
}

// setupLongPoll is a renderer without a browser whose receipt long-polls report, in order, when
// they start waiting; waits counts them.
func setupLongPoll(t *testing.T) (e *env, waiting chan string, waits *atomic.Int64) {
	t.Helper()
	waiting = make(chan string, 16)
	waits = &atomic.Int64{}
	e = setupNoBrowser(t, "sleep 60", func(c *Config) {
		c.receiptWaiting = func(id string) {
			waits.Add(1)
			select {
			case waiting <- id:
			default:
			}
		}
	})
	return e, waiting, waits
}

// TestReceiptLongPollAnswersAtTheStateChange: a long-poll on a running attempt's state answers
// when the attempt is cancelled, without waiting out its wait_ms; following the receipt with
// long-polls reaches the terminal receipt, and an answer in the same state never comes before
// its wait_ms. A long-poll on a state the attempt is not in, or on a terminal attempt, answers
// without waiting.
func TestReceiptLongPollAnswersAtTheStateChange(t *testing.T) {
	e, waiting, waits := setupLongPoll(t)
	req := e.request(fixture.Ready, rc.OpPageCapture, small, time.Minute)
	e.mustAccept(req)
	rec := e.waitFor(req.AttemptID, func(r rc.Receipt) bool { return r.Times.ChildStartedAt != nil })
	if rec.State != rc.StateAccepted { // the shell child reports no browser start
		t.Fatalf("receipt before the cancel = %+v", rec)
	}

	// Another state than the attempt's: answered at once, no wait begun.
	if got, _ := e.longPoll(req.AttemptID, rc.StateRunning, rc.MaxReceiptWaitMS); got.State != rc.StateAccepted || waits.Load() != 0 {
		t.Fatalf("long-poll on another state = %s after %d waits", got.State, waits.Load())
	}
	// Its own state, briefly: the answer is the unchanged receipt, after the whole wait.
	if got, took := e.longPoll(req.AttemptID, rc.StateAccepted, 50); got.State != rc.StateAccepted || took < 50*time.Millisecond {
		t.Fatalf("short long-poll = %s after %s", got.State, took)
	}
	<-waiting

	type answer struct {
		rec  rc.Receipt
		took time.Duration
	}
	answers := make(chan answer, 1)
	go func() {
		r, took := e.longPoll(req.AttemptID, rc.StateAccepted, rc.MaxReceiptWaitMS)
		answers <- answer{r, took}
	}()
	if id := <-waiting; id != req.AttemptID {
		t.Fatalf("a long-poll waits on %s", id)
	}
	if st, b := e.cancel(req.AttemptID); st != http.StatusOK {
		t.Fatalf("cancel = %d %s", st, b)
	}
	got := <-answers
	if got.rec.State == rc.StateAccepted || got.took >= time.Duration(rc.MaxReceiptWaitMS)*time.Millisecond {
		t.Fatalf("long-poll across the cancel = %s after %s; want the changed state before the wait ended", got.rec.State, got.took)
	}

	// Follow it to the end as the driver does: every answer either moved on or waited it out.
	for steps := 0; !got.rec.Terminal(); steps++ {
		if steps > 100 {
			t.Fatalf("receipt never terminal: %+v", got.rec)
		}
		asked := got.rec.State
		got.rec, got.took = e.longPoll(req.AttemptID, asked, 200)
		if got.rec.State == asked && got.took < 200*time.Millisecond {
			t.Fatalf("unchanged %s answered after %s, before its wait", asked, got.took)
		}
	}
	if got.rec.Outcome != rc.OutcomeCancelled || got.rec.ResourceState != rc.ResourceReleased {
		t.Fatalf("terminal receipt = %+v", got.rec)
	}

	// A terminal attempt answers at once, whatever state is asked.
	before := waits.Load()
	for _, st := range []rc.AttemptState{rc.StateTerminal, rc.StateRunning} {
		if r, _ := e.longPoll(req.AttemptID, st, rc.MaxReceiptWaitMS); !r.Terminal() {
			t.Fatalf("long-poll of a terminal attempt in %s = %s", st, r.State)
		}
	}
	if n := waits.Load(); n != before {
		t.Fatalf("%d long-polls of a terminal attempt waited", n-before)
	}
}

// TestReceiptLongPollParameters: without the parameters the query is today's; a bad long-poll is
// RENDER_CONTRACT_MISMATCH (400) before anything else, an unknown attempt 404 at once.
func TestReceiptLongPollParameters(t *testing.T) {
	e, _, waits := setupLongPoll(t)
	req := e.request(fixture.Ready, rc.OpPageCapture, small, time.Minute)
	e.mustAccept(req)
	path := rc.APIRoot + "/executions/" + req.AttemptID
	if rec := e.receipt(req.AttemptID); rec.AttemptID != req.AttemptID || rec.Terminal() {
		t.Fatalf("plain receipt = %+v", rec)
	}
	for _, q := range []string{
		"?state=accepted&wait_ms=0",
		"?state=accepted&wait_ms=1001",
		"?state=accepted&wait_ms=-1",
		"?state=accepted&wait_ms=x",
		"?state=accepted&wait_ms=",
		"?state=accepted&wait_ms=1.5",
		"?state=reserved&wait_ms=100",
		"?state=&wait_ms=100",
		"?state=accepted",
		"?wait_ms=100",
		"?state=accepted&state=running&wait_ms=100",
		"?state=accepted&wait_ms=100&wait_ms=200",
	} {
		for _, id := range []string{req.AttemptID, "ra_never_seen"} {
			st, b, _ := e.do("GET", rc.APIRoot+"/executions/"+id+q, nil)
			if st != http.StatusBadRequest || errorOf(t, b).Code != rc.CodeContractMismatch || errorOf(t, b).Stage != rc.StageRetrieval {
				t.Fatalf("GET %s%s = %d %s", id, q, st, b)
			}
		}
	}
	st, b, _ := e.do("GET", rc.APIRoot+"/executions/ra_never_seen?state=running&wait_ms=1000", nil)
	if st != http.StatusNotFound || errorOf(t, b).Code != rc.CodeResultLost {
		t.Fatalf("long-poll of an unknown attempt = %d %s", st, b)
	}
	// Parameters it does not know are ignored, as before.
	if st, _, _ := e.do("GET", path+"?other=1", nil); st != http.StatusOK {
		t.Fatalf("receipt with an unrelated parameter = %d", st)
	}
	if n := waits.Load(); n != 0 {
		t.Fatalf("%d refused or plain queries waited", n)
	}
	if st, b := e.cancel(req.AttemptID); st != http.StatusOK {
		t.Fatalf("cancel = %d %s", st, b)
	}
	e.waitFor(req.AttemptID, terminal)
}

// TestShutdownEndsReceiptLongPolls: a shutdown stops the running attempt, and a long-poll
// waiting on it answers with the changed state instead of holding the shutdown up.
func TestShutdownEndsReceiptLongPolls(t *testing.T) {
	e, waiting, _ := setupLongPoll(t)
	req := e.request(fixture.Ready, rc.OpPageCapture, small, time.Minute)
	e.mustAccept(req)
	e.waitFor(req.AttemptID, func(r rc.Receipt) bool { return r.Times.ChildStartedAt != nil })
	answers := make(chan rc.AttemptState, 1)
	go func() {
		r, _ := e.longPoll(req.AttemptID, rc.StateAccepted, rc.MaxReceiptWaitMS)
		answers <- r.State
	}()
	<-waiting
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := e.srv.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown with a long-poll waiting: %v", err)
	}
	if st := <-answers; st == rc.StateAccepted {
		t.Fatal("the long-poll answered the state it waited on across the shutdown")
	}
	if r, _ := e.longPoll(req.AttemptID, rc.StateCleaning, rc.MaxReceiptWaitMS); !r.Terminal() || r.ResourceState != rc.ResourceReleased {
		t.Fatalf("receipt after the shutdown = %+v", r)
	}
}
