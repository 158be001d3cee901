package render

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	rc "slidecells/shared/rendercontract"
)

// receiptQuery is one receipt query a driver sent: the long-poll parameters it carried, when it
// arrived, and the state its answer carried.
type receiptQuery struct {
	state, waitMS string
	at            time.Time
	answered      rc.AttemptState
}

// receiptRecorder is a proxy in front of a real renderer that records the receipt queries
// passing through it. With strip it forwards them without their query, as a renderer that
// predates the long-poll sees them (it answers at once).
type receiptRecorder struct {
	mu      sync.Mutex
	queries []receiptQuery
}

func (rr *receiptRecorder) recorded() []receiptQuery {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	return append([]receiptQuery(nil), rr.queries...)
}

func newReceiptRecorder(t *testing.T, rendererURL string, strip bool) (string, *receiptRecorder) {
	t.Helper()
	target, _ := url.Parse(rendererURL)
	rp := httputil.NewSingleHostReverseProxy(target)
	rr := &receiptRecorder{}
	proxy := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		id, isExecution := strings.CutPrefix(r.URL.Path, rc.APIRoot+"/executions/")
		if r.Method != http.MethodGet || !isExecution || strings.Contains(id, "/") {
			rp.ServeHTTP(rw, r)
			return
		}
		q := receiptQuery{state: r.URL.Query().Get(rc.QueryReceiptState), waitMS: r.URL.Query().Get(rc.QueryReceiptWaitMS), at: time.Now()}
		if strip {
			r.URL.RawQuery = ""
		}
		rec := httptest.NewRecorder()
		rp.ServeHTTP(rec, r)
		var receipt rc.Receipt
		if rec.Code == http.StatusOK && json.Unmarshal(rec.Body.Bytes(), &receipt) == nil {
			q.answered = receipt.State
		}
		rr.mu.Lock()
		rr.queries = append(rr.queries, q)
		rr.mu.Unlock()
		for k, v := range rec.Header() {
			rw.Header()[k] = v
		}
		rw.WriteHeader(rec.Code)
		_, _ = rw.Write(rec.Body.Bytes())
	}))
	t.Cleanup(proxy.Close)
	return proxy.URL, rr
}

// captureThroughRecorder runs one capture of doc (a fixture document) through a driver whose
// renderer sits behind a receiptRecorder (strip: one that predates the long-poll), checks that
// it succeeded and returns the receipt queries the driver sent.
func captureThroughRecorder(t *testing.T, strip bool, name, doc string) []receiptQuery {
	t.Helper()
	w := newWorld(t, 1)
	proxyURL, rr := newReceiptRecorder(t, w.renderers[0].url, strip)
	w.workers[0].URL = proxyURL
	c := w.coordinator(t, nil)
	sc := w.f.scopes[0]
	req := submitDoc(t, c, sc, name, rc.OpPageCapture, doc, 1)
	if cur := wait(t, c, sc, req.ID, time.Minute); cur.State != StateSucceeded {
		t.Fatalf("capture %s (renderer without the long-poll: %v): %+v", name, strip, cur)
	}
	return rr.recorded()
}

// TestDriverLongPollsTheReceipt: the driver reads the receipt of its attempt with the renderer's
// long-poll, each time on the state the previous answer carried (the POST's receipt first).
func TestDriverLongPollsTheReceipt(t *testing.T) {
	qs := captureThroughRecorder(t, false, "longpoll", "ready")
	if len(qs) == 0 || qs[len(qs)-1].answered != rc.StateTerminal {
		t.Fatalf("receipt queries %+v; want them to end at the terminal receipt", qs)
	}
	want := rc.StateAccepted // what the POST answered
	for i, q := range qs {
		if q.state != string(want) || q.waitMS != "250" {
			t.Fatalf("query %d asked state=%q wait_ms=%q, want %q and 250 (queries %+v)", i, q.state, q.waitMS, want, qs)
		}
		want = q.answered
	}
}

// TestDriverPacesARendererThatIgnoresTheLongPoll: a renderer that answers the long-poll at once
// (one that predates it, during a rolling deploy) is read no faster than the poll interval allows
// — PollInterval growing to maxPollInterval, plus one immediate read per state change — and the
// render still succeeds. The "slow" document keeps the attempt running for 3 s.
func TestDriverPacesARendererThatIgnoresTheLongPoll(t *testing.T) {
	qs := captureThroughRecorder(t, true, "old-renderer", "slow")
	if len(qs) < 2 {
		t.Fatalf("%d receipt queries over a 3 s attempt", len(qs))
	}
	span := qs[len(qs)-1].at.Sub(qs[0].at)
	// The reads while the interval grows (15, 22, 33 ms) and after each of the three state
	// changes come sooner than maxPollInterval apart; every other one waits at least that long.
	limit := int(span/maxPollInterval) + 1 + 4 + 3
	t.Logf("%d receipt queries in %s (at most %d allowed)", len(qs), span, limit)
	if len(qs) > limit {
		t.Fatalf("%d receipt queries in %s, more than the %d the poll interval allows", len(qs), span, limit)
	}
	if span < 2*time.Second {
		t.Fatalf("receipt queries spanned %s; the slow document should keep the attempt running 3 s", span)
	}
}
