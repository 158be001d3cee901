package load

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// Attack is one operation's load: vegeta's attacker sending Targeter's requests, either at a
// fixed rate (open loop: Rate > 0, the latency of a slow answer does not slow the schedule) or
// with exactly Workers requests in flight (closed loop: Rate = 0).
type Attack struct {
	Op       string
	Targeter vegeta.Targeter // returns vegeta.ErrNoTargets when its samples are used up
	Rate     float64         // requests per second; 0: closed loop
	Workers  int             // closed loop: requests in flight; open loop: initial workers
	Check    Check
	// Accept lists statuses that count as success besides 2xx and 3xx (a benchmark of the
	// router sends requests a cell refuses on purpose).
	Accept []int
	// OnResult sees every answer (after it was recorded), e.g. to follow a job it started.
	OnResult func(*vegeta.Result)
	// Driver attacks decide the run's length: once every driver has used up its targets, the
	// other attacks stop. Without drivers the run lasts its whole duration.
	Driver bool
}

func (a Attack) pacer() vegeta.Pacer {
	switch {
	case a.Rate <= 0:
		return vegeta.ConstantPacer{} // infinite rate: the workers bound it
	case a.Rate >= 1:
		return vegeta.ConstantPacer{Freq: int(a.Rate + 0.5), Per: time.Second}
	}
	return vegeta.ConstantPacer{Freq: 1, Per: time.Duration(float64(time.Second) / a.Rate)}
}

// Run runs the attacks together for at most d (and until ctx ends), recording into rec, and
// prints rec's progress line through progress every two seconds. It returns when every attack
// stopped and every follow-up registered with Follow finished (bounded by their own limits).
func (f *Fixture) Run(ctx context.Context, rec *Recorder, attacks []Attack, d time.Duration, progress func(string)) time.Duration {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	drivers := sync.WaitGroup{}
	all := sync.WaitGroup{}
	haveDriver := false
	start := time.Now()
	for _, a := range attacks {
		workers := uint64(max(a.Workers, 1))
		opts := []func(*vegeta.Attacker){vegeta.Client(f.Client), vegeta.Workers(workers)}
		if a.Rate <= 0 {
			opts = append(opts, vegeta.MaxWorkers(workers))
		} else {
			opts = append(opts, vegeta.MaxWorkers(512))
		}
		atk := vegeta.NewAttacker(opts...)
		all.Add(1)
		if a.Driver {
			haveDriver = true
			drivers.Add(1)
		}
		go func() {
			defer all.Done()
			if a.Driver {
				defer drivers.Done()
			}
			stop := context.AfterFunc(ctx, func() { atk.Stop() })
			defer stop()
			for r := range atk.Attack(a.Targeter, a.pacer(), 0, a.Op) {
				if r.Method == "" { // the targeter ran out (or failed): not a request
					continue
				}
				s := FromResult(a.Op, r, a.Check)
				if slices.Contains(a.Accept, s.Status) {
					s.Error = ""
				}
				rec.Add(s)
				if a.OnResult != nil {
					a.OnResult(r)
				}
			}
		}()
	}
	if haveDriver {
		go func() { drivers.Wait(); cancel() }()
	}
	done := make(chan struct{})
	go func() { all.Wait(); close(done) }()
	t := time.NewTicker(2 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-done:
			took := time.Since(start)
			f.follow.Wait()
			if progress != nil {
				progress(rec.Progress())
			}
			return took
		case <-t.C:
			if progress != nil {
				progress(rec.Progress())
			}
		}
	}
}

// randomWorkspace picks one of the fixture's workspaces.
func (f *Fixture) randomWorkspace() *Workspace { return f.Workspaces[rand.IntN(len(f.Workspaces))] }

func (f *Fixture) target(t *vegeta.Target, w *Workspace, method, path string, body []byte) {
	t.Method, t.URL, t.Body, t.Header = method, f.Base+path, body, w.Header()
	if method != http.MethodGet {
		t.Header.Set("Idempotency-Key", f.Key())
	}
}

// APIMix is the read/write mix of the api scenario: operation → share of the requests.
var APIMix = []struct {
	Op    string
	Share float64
}{{OpWorkspaceGet, 0.10}, {OpProjectList, 0.35}, {OpProjectGet, 0.35}, {OpProjectCreate, 0.20}}

// APIAttacks is the api scenario: workspace reads, project lists and reads, and project creates
// (each with a new Idempotency-Key) in random workspaces of every cell, at rate requests per
// second in all (open loop), or with workers requests in flight in all when rate is 0.
func (f *Fixture) APIAttacks(rate float64, workers int) []Attack {
	var out []Attack
	for _, m := range APIMix {
		a := Attack{Op: m.Op, Rate: rate * m.Share, Workers: max(1, int(float64(workers)*m.Share+0.5))}
		if rate > 0 {
			a.Workers = 4
		}
		switch m.Op {
		case OpWorkspaceGet:
			a.Targeter = func(t *vegeta.Target) error {
				w := f.randomWorkspace()
				f.target(t, w, http.MethodGet, "/api/v1/workspaces/"+w.ID, nil)
				return nil
			}
		case OpProjectList:
			a.Targeter = func(t *vegeta.Target) error {
				f.target(t, f.randomWorkspace(), http.MethodGet, "/api/v1/projects?limit=20", nil)
				return nil
			}
		case OpProjectGet:
			a.Targeter = func(t *vegeta.Target) error {
				w := f.randomWorkspace()
				f.target(t, w, http.MethodGet, "/api/v1/projects/"+w.ProjectID, nil)
				return nil
			}
		case OpProjectCreate:
			a.Targeter = func(t *vegeta.Target) error {
				n := f.seq.Add(1)
				f.target(t, f.randomWorkspace(), http.MethodPost, "/api/v1/projects",
					fmt.Appendf(nil, `{"name":"load %s %d"}`, f.RunID, n))
				return nil
			}
		}
		out = append(out, a)
	}
	return out
}

// JobAttack is the jobs scenario: page-create jobs submitted at rate per second in random
// workspaces (job.submit), each followed by polls every 25 ms (job.poll) until it finished;
// job.page_create is the whole flow, from the submission to the poll that saw it succeed.
func (f *Fixture) JobAttack(ctx context.Context, rec *Recorder, rate float64) Attack {
	var mu sync.Mutex
	byURL := map[uint64]*Workspace{}
	var seq atomic.Uint64
	a := Attack{Op: OpJobSubmit, Rate: rate, Workers: 4}
	a.Targeter = func(t *vegeta.Target) error {
		w := f.randomWorkspace()
		b, _ := json.Marshal(PageBody(f.RunID, w.ProjectID, f.seq.Add(1)))
		f.target(t, w, http.MethodPost, "/api/v1/pages", b)
		// The answer must find its workspace again: vegeta's result carries only the URL, so
		// a fragment (never sent) tells them apart.
		id := seq.Add(1)
		mu.Lock()
		byURL[id] = w
		mu.Unlock()
		t.URL += fmt.Sprintf("#%d", id)
		return nil
	}
	a.OnResult = func(r *vegeta.Result) {
		var id uint64
		if _, frag, ok := strings.Cut(r.URL, "#"); ok {
			fmt.Sscan(frag, &id)
		}
		mu.Lock()
		w := byURL[id]
		delete(byURL, id)
		mu.Unlock()
		if w == nil || r.Code != http.StatusAccepted {
			return
		}
		job, err := JobID(r.Body)
		if err != nil {
			return
		}
		f.follow.Add(1)
		go func() {
			defer f.follow.Done()
			f.followJob(context.WithoutCancel(ctx), rec, w, job, r.Timestamp)
		}()
	}
	return a
}

// followJob polls a job until it is terminal (at most two minutes) and records the polls and
// the whole flow.
func (f *Fixture) followJob(ctx context.Context, rec *Recorder, w *Workspace, job string, submitted time.Time) {
	deadline := submitted.Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		time.Sleep(25 * time.Millisecond)
		t0 := time.Now()
		st, j, err := f.PollJob(ctx, w, job)
		s := Sample{Op: OpJobPoll, Start: t0, Latency: time.Since(t0), Status: st}
		switch {
		case err != nil && st == 0:
			s.Error = TransportClass(err.Error())
		case st != http.StatusOK:
			s.Error = fmt.Sprintf("%d", st)
		}
		rec.Add(s)
		if st != http.StatusOK || !j.Terminal() {
			continue
		}
		e := Sample{Op: OpJobEndToEnd, Start: submitted, Latency: time.Since(submitted), Status: st}
		if j.Status != "succeeded" {
			e.Error = "job " + j.Status + " " + j.ErrorCode
		}
		rec.Add(e)
		return
	}
	rec.Add(Sample{Op: OpJobEndToEnd, Start: submitted, Latency: time.Since(submitted), Error: "job not finished in 2 minutes"})
}

// pool hands out each page once, then vegeta.ErrNoTargets.
func pool(pages []Page, next func(t *vegeta.Target, p Page)) vegeta.Targeter {
	var i atomic.Int64
	return func(t *vegeta.Target) error {
		n := int(i.Add(1) - 1)
		if n >= len(pages) {
			return vegeta.ErrNoTargets
		}
		next(t, pages[n])
		return nil
	}
}

// ValidateAttack validates each page once (POST /api/v1/pages/{id}/validate: compile, then a
// page.diagnose through the cell's render coordinator, interactive), workers at a time. A 200
// whose status is not "passed" is an error of its code.
func (f *Fixture) ValidateAttack(pages []Page, workers int) Attack {
	return Attack{Op: OpValidate, Workers: workers, Driver: true,
		Targeter: pool(pages, func(t *vegeta.Target, p Page) {
			f.target(t, p.WS, http.MethodPost, "/api/v1/pages/"+p.ID+"/validate", nil)
			t.Header.Del("Idempotency-Key") // read-only: no idempotency semantics
		}),
		Check: func(_ int, _ http.Header, body []byte) string {
			var v struct{ Status, Code string }
			if err := json.Unmarshal(body, &v); err != nil {
				return "200 unreadable validation"
			}
			if v.Status != "passed" {
				return strings.TrimSpace("200 " + v.Status + " " + v.Code)
			}
			return ""
		}}
}

// ScreenshotAttack takes each page's screenshot once (GET /api/v1/pages/{id}/screenshot: a
// page.capture through the render coordinator, background), workers at a time.
func (f *Fixture) ScreenshotAttack(pages []Page, workers int) Attack {
	return Attack{Op: OpScreenshot, Workers: workers, Driver: true,
		Targeter: pool(pages, func(t *vegeta.Target, p Page) {
			f.target(t, p.WS, http.MethodGet, "/api/v1/pages/"+p.ID+"/screenshot", nil)
		}),
		Check: func(_ int, h http.Header, body []byte) string {
			if h.Get("Content-Type") != "image/png" || len(body) < 8 || string(body[1:4]) != "PNG" {
				return "200 not a PNG"
			}
			return ""
		}}
}
