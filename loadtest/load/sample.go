package load

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// Sample is one measured operation: an HTTP request, or a flow of several (a mutation job from
// its submission until a poll saw it finished).
type Sample struct {
	Op      string        `json:"op"`
	Start   time.Time     `json:"start"`
	Latency time.Duration `json:"latency"`
	Status  int           `json:"status"`          // HTTP status; 0 when none came back
	Error   string        `json:"error,omitempty"` // empty when the operation succeeded, else its class (ErrorClass)
}

// OK says whether the operation succeeded.
func (s Sample) OK() bool { return s.Error == "" }

// ErrorClass names what went wrong with an answer, so that errors can be counted by kind: the
// HTTP status and the API's error code ("429 RATE_LIMITED", "503 RENDER_QUEUE_FULL"), the status
// alone when the body carries no code, or "" for a 2xx/3xx answer.
func ErrorClass(status int, body []byte) string {
	if status >= 200 && status < 400 {
		return ""
	}
	var p struct {
		Code string `json:"code"`
	}
	if json.Unmarshal(body, &p) == nil && p.Code != "" {
		return fmt.Sprintf("%d %s", status, p.Code)
	}
	return fmt.Sprintf("%d", status)
}

// TransportClass names a failure without an HTTP answer by its kind, never by its full text
// (which carries addresses and varies per request).
func TransportClass(err string) string {
	switch e := strings.ToLower(err); {
	case strings.Contains(e, "timeout") || strings.Contains(e, "deadline exceeded"):
		return "transport: timeout"
	case strings.Contains(e, "refused"):
		return "transport: connection refused"
	case strings.Contains(e, "reset"):
		return "transport: connection reset"
	case strings.Contains(e, "eof"):
		return "transport: EOF"
	case strings.Contains(e, "canceled"):
		return "transport: canceled"
	}
	return "transport: error"
}

// Check classifies a 2xx answer whose body says it did not succeed (a validation whose render
// stage was unavailable): it returns "" for success, else the error class.
type Check func(status int, header http.Header, body []byte) string

// FromResult turns one of vegeta's results into a Sample of op, classified by its status and
// error code and then by check (which sees only 2xx/3xx answers).
func FromResult(op string, r *vegeta.Result, check Check) Sample {
	s := Sample{Op: op, Start: r.Timestamp, Latency: r.Latency, Status: int(r.Code)}
	switch {
	case r.Code == 0:
		s.Error = TransportClass(r.Error)
	default:
		s.Error = ErrorClass(int(r.Code), r.Body)
		if s.Error == "" && check != nil {
			s.Error = check(int(r.Code), r.Headers, r.Body)
		}
	}
	return s
}

// Recorder collects samples from many goroutines and keeps running counts for the progress
// line.
type Recorder struct {
	mu      sync.Mutex
	samples []Sample
	counts  map[string]*opCount
	began   time.Time
}

type opCount struct{ n, errs int }

// NewRecorder returns an empty recorder whose clock starts now.
func NewRecorder() *Recorder {
	return &Recorder{counts: map[string]*opCount{}, began: time.Now()}
}

// Add records a sample.
func (r *Recorder) Add(s Sample) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.samples = append(r.samples, s)
	c := r.counts[s.Op]
	if c == nil {
		c = &opCount{}
		r.counts[s.Op] = c
	}
	c.n++
	if !s.OK() {
		c.errs++
	}
}

// Samples returns a copy of what was recorded.
func (r *Recorder) Samples() []Sample {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Sample(nil), r.samples...)
}

// Count is the number of samples of op and how many of them failed.
func (r *Recorder) Count(op string) (n, errs int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c := r.counts[op]; c != nil {
		return c.n, c.errs
	}
	return 0, 0
}

// Progress is one line: elapsed time, then per operation its count and errors so far.
func (r *Recorder) Progress() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	ops := make([]string, 0, len(r.counts))
	for op := range r.counts {
		ops = append(ops, op)
	}
	sort.Strings(ops)
	var b strings.Builder
	fmt.Fprintf(&b, "[%5.0fs]", time.Since(r.began).Seconds())
	for _, op := range ops {
		c := r.counts[op]
		fmt.Fprintf(&b, " %s %d", op, c.n)
		if c.errs > 0 {
			fmt.Fprintf(&b, " (%d err)", c.errs)
		}
	}
	return b.String()
}
