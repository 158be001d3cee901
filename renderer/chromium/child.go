package chromium

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image/png"
	"io"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/inspector"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	cdpruntime "github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	rc "slidecells/shared/rendercontract"
)

// maxJobBytes bounds the job read from standard input.
const maxJobBytes = 1 << 20

// Exit codes of the child. The control process trusts only the event
// stream, these only help reading logs.
const (
	ExitOK      = 0
	ExitBadJob  = 2
	ExitStopped = 3
	ExitIO      = 4
	// ExitStandbyFailed: a standby's browser did not start, exited or
	// failed a check before any attempt took it.
	ExitStandbyFailed = 5
)

// RunChild is the child program: read a job from stdin, run it, write events
// to stdout. SIGTERM closes the browser and ends the child without a
// result; the supervisor decides the outcome of a stopped attempt.
//
// A first message with Standby set prepares the attempt's browser before
// the attempt is known (see standby): the job follows on stdin once an
// attempt takes this child. A plain job runs at once, starting its browser.
func RunChild(stdin io.Reader, stdout, stderr io.Writer) int {
	logf := func(format string, args ...any) { fmt.Fprintf(stderr, "child: "+format+"\n", args...) }
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM, syscall.SIGINT)

	dec := json.NewDecoder(io.LimitReader(stdin, maxJobBytes))
	var job Job
	if err := dec.Decode(&job); err != nil {
		logf("bad job: %v", err)
		return ExitBadJob
	}
	makeChildDirs()
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var stopped sync.Once
	isStopped := make(chan struct{})
	go func() {
		<-term
		// Closing resources is the separate control flow: cancelling
		// the allocator kills the browser, and every call waiting on
		// it returns. Nothing waits on a call to end by itself.
		stopped.Do(func() { close(isStopped) })
		stop()
	}()
	w := NewEventWriter(stdout)
	var pre *browser
	started := time.Now()
	if job.Standby {
		var code int
		pre, job, started, code = standby(ctx, dec, job, w, logf)
		if code >= 0 {
			return code
		}
	}
	res := execute(ctx, job, started, w, logf, pre)
	select {
	case <-isStopped:
		return ExitStopped
	default:
	}
	if err := w.Send(Event{Type: EventResult, Result: res}); err != nil {
		logf("result not written: %v", err)
		return ExitIO
	}
	return ExitOK
}

type attempt struct {
	job     Job
	w       *EventWriter
	logf    func(string, ...any)
	until   time.Time
	gate    *gate
	exp     expect
	mu      sync.Mutex
	scene   string
	errors  map[string][]rc.RuntimeError
	docResp map[network.RequestID]int64
	// ch is the readiness channel; topFrame and loader name the page's
	// main frame and the navigation to the preview document; world is the
	// renderer's isolated world in it (0 until made).
	ch       *channel
	topFrame cdp.FrameID
	loader   cdp.LoaderID
	world    cdpruntime.ExecutionContextID
	// crashed is set, and crash called, when the page's renderer process
	// crashed.
	crashed atomic.Bool
	crash   context.CancelFunc
}

// relaunchWithin is how soon a browser start must fail to be tried once more: a browser that
// exits while starting (rarely seen under load, with nothing on its output) fails at once, and
// a second start in a fresh profile costs a fraction of a second; a start that timed out is
// not repeated.
const relaunchWithin = 5 * time.Second

// browser is a started browser with its DevTools connection.
type browser struct {
	ctx  context.Context
	stop func()
	// lost is closed when the connection to the browser is gone (it
	// exited or was killed).
	lost <-chan struct{}
}

// profileSeq numbers the browser profiles of this child: every launch gets a fresh one.
var profileSeq atomic.Int64

// startBrowser starts the browser and connects to it, once more in a fresh profile when the
// first start failed fast (and until leaves time for it).
func startBrowser(ctx context.Context, job Job, until time.Time, logf func(string, ...any)) (*browser, error) {
	wd, _ := os.Getwd()
	for try := 1; ; try++ {
		opts := []chromedp.ExecAllocatorOption{
			chromedp.ExecPath(job.Browser.Path),
			chromedp.UserDataDir(filepath.Join(wd, fmt.Sprintf("profile-%d", profileSeq.Add(1)))),
			chromedp.WSURLReadTimeout(30 * time.Second),
			chromedp.ModifyCmdFunc(func(cmd *exec.Cmd) {
				// Same process group as the child (the supervisor kills
				// the group), and die with the child.
				cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
			}),
		}
		opts = append(opts, Options(LaunchFlags(job.networkFlags()))...)
		if job.BrowserLog {
			opts = append(opts, chromedp.CombinedOutput(logWriter{logf}))
		}
		began := time.Now()
		allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
		bctx, cancelBrowser := chromedp.NewContext(allocCtx, chromedp.WithErrorf(func(f string, args ...any) { logf("chromedp: "+f, args...) }))
		err := chromedp.Run(bctx)
		if err == nil {
			b := &browser{ctx: bctx, stop: func() { cancelBrowser(); cancelAlloc() }}
			if c := chromedp.FromContext(bctx); c != nil && c.Browser != nil {
				b.lost = c.Browser.LostConnection
			}
			return b, nil
		}
		cancelBrowser()
		cancelAlloc()
		logf("browser start %d: %v", try, err)
		if try == 2 || ctx.Err() != nil || time.Since(began) > relaunchWithin || time.Until(until) < 2*relaunchWithin {
			return nil, err
		}
	}
}

// networkFlags are the launch parameters of the job's browser that come from the job.
func (j Job) networkFlags() NetworkFlags {
	return NetworkFlags{ProxyAddr: j.EgressProxy, AllowedOrigins: j.Document.AllowedOrigins, NoBrowserGate: j.NoBrowserGate}
}

// sameLaunch tells whether a browser prepared for standby job s was launched exactly as job j
// would launch its own.
func sameLaunch(s, j Job) bool {
	return s.Browser.Path == j.Browser.Path && s.BrowserLog == j.BrowserLog &&
		slices.Equal(LaunchFlags(s.networkFlags()), LaunchFlags(j.networkFlags()))
}

// DefaultStandbyCheck is how often a standby child checks its idle browser when the standby
// message does not say.
const DefaultStandbyCheck = 5 * time.Second

// standbyCheckTimeout bounds one check of the idle browser.
const standbyCheckTimeout = 10 * time.Second

// checkBrowser asks the browser's first page to evaluate a constant: the browser process, its
// DevTools connection and the page's sandboxed renderer process all answer. The page is the
// browser's initial about:blank; nothing is opened.
func checkBrowser(b *browser) error {
	ctx, cancel := context.WithTimeout(b.ctx, standbyCheckTimeout)
	defer cancel()
	var n int
	if err := chromedp.Run(ctx, chromedp.Evaluate("1", &n)); err != nil {
		return err
	}
	if n != 1 {
		return fmt.Errorf("browser evaluated 1 as %d", n)
	}
	return nil
}

// standby prepares the attempt's browser before the attempt is known: it starts the browser
// with exactly the attempt's launch parameters (from sb, which carries no request data), checks
// it, reports EventStandbyReady and waits for the job, checking the browser every
// sb.StandbyCheck. A browser that dies or fails a check is reported (EventStandbyFailed) and the
// child ends: the control process replaces the standby. When the job arrives the browser is
// handed to it (exit code -1) with the time the job arrived, from which its budget counts (a
// job that arrives while the browser still starts counts that start against its budget, as a
// cold start does); a browser that died meanwhile or was launched differently is closed and
// the job starts its own. Standard input closing without a job, or SIGTERM, ends the child
// with the given code.
func standby(ctx context.Context, dec *json.Decoder, sb Job, w *EventWriter, logf func(string, ...any)) (*browser, Job, time.Time, int) {
	type arrival struct {
		job Job
		at  time.Time
	}
	jobs := make(chan arrival, 1)
	jobErr := make(chan error, 1)
	go func() {
		var j Job
		if err := dec.Decode(&j); err != nil {
			jobErr <- err
			return
		}
		jobs <- arrival{j, time.Now()}
	}()
	var none time.Time
	fail := func(format string, args ...any) (*browser, Job, time.Time, int) {
		msg := fmt.Sprintf(format, args...)
		logf("standby failed: %s", msg)
		_ = w.Send(Event{Type: EventStandbyFailed, Message: msg})
		return nil, Job{}, none, ExitStandbyFailed
	}
	if os.Geteuid() == 0 {
		// As in execute: chromedp would add --no-sandbox for root.
		return fail("execution child runs as root; refusing to start a browser without its sandbox")
	}
	began := time.Now()
	b, err := startBrowser(ctx, sb, time.Now().Add(time.Hour), logf)
	logf("standby browser started after %s", time.Since(began).Round(time.Millisecond))
	if err != nil {
		if ctx.Err() != nil {
			return nil, Job{}, none, ExitStopped
		}
		return fail("browser did not start")
	}
	// handOver gives the browser to the job, unless the job would launch
	// another or the browser is gone.
	handOver := func(j arrival) (*browser, Job, time.Time, int) {
		if j.job.Standby || !sameLaunch(sb, j.job) {
			logf("job does not match the standby's launch parameters; starting its own browser")
			b.stop()
			return nil, j.job, j.at, -1
		}
		select {
		case <-b.lost:
			logf("standby browser gone at hand-over; starting a fresh one")
			b.stop()
			return nil, j.job, j.at, -1
		default:
		}
		return b, j.job, j.at, -1
	}
	// A job that arrived while the browser started (a cold start) takes
	// it at once: its own set-up uses the page right away.
	select {
	case j := <-jobs:
		return handOver(j)
	default:
	}
	if err := checkBrowser(b); err != nil {
		b.stop()
		if ctx.Err() != nil {
			return nil, Job{}, none, ExitStopped
		}
		logf("standby check: %v", err)
		return fail("browser started but its page did not answer")
	}
	logf("standby browser checked after %s", time.Since(began).Round(time.Millisecond))
	_ = w.Send(Event{Type: EventStandbyReady})
	every := sb.StandbyCheck
	if every <= 0 {
		every = DefaultStandbyCheck
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case j := <-jobs:
			return handOver(j)
		case err := <-jobErr:
			b.stop()
			if err == io.EOF {
				// Discarded before any attempt took it.
				return nil, Job{}, none, ExitOK
			}
			logf("bad job: %v", err)
			return nil, Job{}, none, ExitBadJob
		case <-ctx.Done():
			b.stop()
			return nil, Job{}, none, ExitStopped
		case <-b.lost:
			b.stop()
			return fail("browser exited")
		case <-tick.C:
			if err := checkBrowser(b); err != nil {
				b.stop()
				if ctx.Err() != nil {
					return nil, Job{}, none, ExitStopped
				}
				logf("standby check: %v", err)
				return fail("browser stopped answering")
			}
		}
	}
}

// execute runs the job; pre, when set, is the browser a standby prepared for it.
func execute(ctx context.Context, job Job, started time.Time, w *EventWriter, logf func(string, ...any), pre *browser) *ChildResult {
	res := &ChildResult{}
	if os.Geteuid() == 0 {
		// chromedp would add --no-sandbox for root; the sandbox stays
		// on or nothing runs.
		res.Error = rc.NewError(rc.CodeInternal, rc.StageLaunch, "execution child runs as root; refusing to start a browser without its sandbox")
		return res
	}
	doc, err := url.Parse(job.Document.URL)
	if !job.Probe && (err != nil || (doc.Scheme != "http" && doc.Scheme != "https")) {
		res.Error = rc.NewError(rc.CodeInternal, rc.StageLaunch, "document URL is not http(s)")
		return res
	}
	a := &attempt{
		job:     job,
		w:       w,
		logf:    logf,
		until:   started.Add(job.Budget),
		gate:    newGate(doc, job.Document.AllowedOrigins, rc.PreviewAccessHeader, job.Document.AccessToken),
		exp:     expect{artifactID: job.Document.ArtifactID, inputDigest: job.Document.InputDigest, hostBuild: job.Document.HostBuild},
		scene:   rc.DefaultScene,
		errors:  map[string][]rc.RuntimeError{},
		docResp: map[network.RequestID]int64{},
		ch:      newChannel(),
	}
	a.gate.logf = logf
	a.gate.traceparent = job.Traceparent
	defer func() {
		res.BlockedRequests = int(a.gate.blocked.Load())
		res.IgnoredReadinessCalls = a.ch.ignoredCalls()
	}()

	b := pre
	if b == nil {
		var err error
		if b, err = startBrowser(ctx, job, a.until, logf); err != nil {
			res.Error = rc.NewError(rc.CodeBrowserLost, rc.StageLaunch, "browser did not start")
			return res
		}
		logf("browser started after %s", time.Since(started).Round(time.Millisecond))
	} else {
		logf("took the standby's browser")
	}
	// The browser is not closed here: the result goes out as soon as the work is done, the
	// child then exits, and the browser dies with it (parent-death signal) and with the
	// attempt's PID namespace, which the supervisor kills and proves empty before the terminal
	// receipt. A graceful close first (DevTools Browser.close, waiting for every process to
	// exit) would only delay the result and the teardown: the profile it would flush is in
	// the attempt directory the supervisor removes.
	bctx := b.ctx
	_ = w.Send(Event{Type: EventBrowserStarted})
	if job.Probe {
		// The launch probe: the browser started with the sandbox inside
		// the attempt's namespaces and limits, and renders a blank page.
		if err := chromedp.Run(bctx, chromedp.Navigate("about:blank")); err != nil {
			logf("probe page: %v", err)
			res.Error = rc.NewError(rc.CodeBrowserLost, rc.StageLaunch, "browser started but did not open a page")
		}
		return res
	}

	// Waits on the page end when its renderer process crashes (the
	// attempt's memory limit, for one): the crash event cancels them.
	wctx, cancelWaits := context.WithCancel(bctx)
	defer cancelWaits()
	a.crash = cancelWaits
	defer func() {
		if a.crashed.Load() {
			stage := rc.StageReadiness
			if res.Error != nil {
				stage = res.Error.Stage
			}
			res.Error = rc.NewError(rc.CodeBrowserLost, stage, "the page's renderer process crashed (out of memory or killed)")
		}
	}()
	chromedp.ListenTarget(bctx, a.onEvent(bctx))
	bctx = wctx
	if e := a.setup(bctx); e != nil {
		res.Error = e
		return res
	}
	if e := a.navigate(bctx, doc); e != nil {
		res.Error = e
		return res
	}
	logf("document committed after %s", time.Since(started).Round(time.Millisecond))
	st, e := a.waitReady(bctx, rc.DefaultScene)
	if st != nil {
		res.HostBuild, res.ArtifactID, res.InputDigest = st.HostBuild, st.ArtifactID, st.InputDigest
	}
	if e != nil {
		res.Error = e
		return res
	}
	_ = w.Send(Event{Type: EventReady})

	switch job.Operation {
	case rc.OpPageCapture:
		res.Error = a.capture(bctx, st)
	case rc.OpPageDiagnose, rc.OpComponentDiagnose:
		res.Error = a.diagnose(bctx, st)
	default:
		res.Error = rc.NewError(rc.CodeContractMismatch, rc.StageAdmission, "unknown operation")
	}
	if res.Error == nil {
		logf("blocked requests to: %v", a.gate.blockedOrigins())
	}
	return res
}

// onEvent handles browser events. It must not block: anything that calls
// back into the browser runs in its own goroutine.
func (a *attempt) onEvent(ctx context.Context) func(any) {
	return func(ev any) {
		switch ev := ev.(type) {
		case *fetch.EventRequestPaused:
			go a.gate.handle(ctx, ev)
		case *page.EventFrameNavigated, *cdpruntime.EventExecutionContextCreated, *cdpruntime.EventExecutionContextDestroyed,
			*cdpruntime.EventExecutionContextsCleared, *cdpruntime.EventBindingCalled:
			a.ch.handle(ev)
		case *inspector.EventTargetCrashed:
			a.logf("page renderer crashed")
			a.crashed.Store(true)
			if a.crash != nil {
				a.crash()
			}
		case *cdpruntime.EventExceptionThrown:
			msg := "uncaught exception"
			if d := ev.ExceptionDetails; d != nil {
				msg = d.Text
				if d.Exception != nil && d.Exception.Description != "" {
					msg = d.Exception.Description
				}
			}
			a.recordError(msg)
		case *cdpruntime.EventConsoleAPICalled:
			if ev.Type == cdpruntime.APITypeError && len(ev.Args) > 0 {
				var parts []string
				for _, arg := range ev.Args {
					if arg.Value != nil {
						parts = append(parts, strings.Trim(string(arg.Value), `"`))
					} else if arg.Description != "" {
						parts = append(parts, arg.Description)
					}
				}
				a.recordError("console.error: " + strings.Join(parts, " "))
			}
		case *network.EventResponseReceived:
			if ev.Type == network.ResourceTypeDocument && ev.Response != nil {
				a.mu.Lock()
				a.docResp[ev.RequestID] = ev.Response.Status
				a.mu.Unlock()
			}
		}
	}
}

// Runtime errors keep the first line only: stacks and exception chains stay
// out of results.
const maxRuntimeErrors, maxRuntimeErrorChars = 50, 300

func (a *attempt) recordError(msg string) {
	first, _, _ := strings.Cut(msg, "\n")
	re := rc.RuntimeError{Message: first, Truncated: first != msg}
	if len(re.Message) > maxRuntimeErrorChars {
		re.Message, re.Truncated = re.Message[:maxRuntimeErrorChars], true
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	errs := a.errors[a.scene]
	switch {
	case len(errs) < maxRuntimeErrors:
		a.errors[a.scene] = append(errs, re)
	case len(errs) == maxRuntimeErrors:
		// Truncation is always marked: one last entry says that more
		// errors happened than the result lists.
		a.errors[a.scene] = append(errs, rc.RuntimeError{Message: "further runtime errors were not recorded", Truncated: true})
	}
}

// animationCSS is installed at document start in every frame: animations
// and transitions jump to their end state.
const animationCSS = `(() => {
  const css = '*, *::before, *::after { animation-duration: 0s !important; animation-delay: 0s !important; transition-duration: 0s !important; transition-delay: 0s !important; caret-color: transparent !important; scroll-behavior: auto !important; }';
  const install = () => { const s = document.createElement('style'); s.setAttribute('data-render-policy', 'animations'); s.textContent = css; (document.head || document.documentElement).appendChild(s); };
  if (document.documentElement) install(); else document.addEventListener('DOMContentLoaded', install, {once: true});
})()`

// setup prepares the page before navigation. The calls are independent of
// each other (each must only have answered before Page.navigate), so they go
// out at once: the set-up costs about one round trip, not one per call.
func (a *attempt) setup(ctx context.Context) *rc.Error {
	began := time.Now()
	vp := a.job.Viewport
	pw, ph := vp.PhysicalSize()
	calls := []chromedp.Action{
		network.Enable(),
		cdpruntime.Enable(),
		emulation.SetDeviceMetricsOverride(int64(vp.Width), int64(vp.Height), vp.DeviceScaleFactor, false).
			WithScreenWidth(int64(vp.Width)).WithScreenHeight(int64(vp.Height)),
		emulation.SetLocaleOverride().WithLocale(a.job.Browser.Locale),
		emulation.SetTimezoneOverride(a.job.Browser.Timezone),
		emulation.SetEmulatedMedia().WithFeatures([]*emulation.MediaFeature{
			{Name: "prefers-color-scheme", Value: ColorScheme},
			{Name: "prefers-reduced-motion", Value: "reduce"},
		}),
		chromedp.ActionFunc(func(ctx context.Context) error {
			_, err := page.AddScriptToEvaluateOnNewDocument(animationCSS).Do(ctx)
			return err
		}),
		// The readiness channel exists before the document does, so the
		// host's bootstrap finds it in its first script.
		cdpruntime.AddBinding(rc.ReadyBinding),
		chromedp.ActionFunc(func(ctx context.Context) error {
			tree, err := page.GetFrameTree().Do(ctx)
			if err != nil {
				return err
			}
			a.topFrame = tree.Frame.ID
			a.ch.setTopFrame(tree.Frame.ID)
			return nil
		}),
	}
	if !a.job.NoBrowserGate {
		calls = append(calls, fetch.Enable().WithPatterns([]*fetch.RequestPattern{{URLPattern: "*", RequestStage: fetch.RequestStageRequest}}))
	}
	if err := runAtOnce(ctx, calls); err != nil {
		a.logf("setup: %v (canvas %dx%d)", err, pw, ph)
		return rc.NewError(rc.CodeBrowserLost, rc.StageLaunch, "browser setup failed")
	}
	a.logf("set up in %s", time.Since(began).Round(100*time.Microsecond))
	return nil
}

// runAtOnce runs independent DevTools calls on the page concurrently and
// returns when every one has answered, with their errors. chromedp's target
// executor is safe for concurrent use (each call has its own message id and
// reply listener, and the commands share one queue to the connection); the
// gate already calls the page from its own goroutines.
func runAtOnce(ctx context.Context, calls []chromedp.Action) error {
	// The page's target is attached by the browser's first Run; this one
	// (no call, no round trip) makes sure of it before the goroutines
	// read it.
	if err := chromedp.Run(ctx); err != nil {
		return err
	}
	errs := make([]error, len(calls))
	var wg sync.WaitGroup
	for i, call := range calls {
		wg.Go(func() { errs[i] = chromedp.Run(ctx, call) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (a *attempt) navigate(ctx context.Context, doc *url.URL) *rc.Error {
	var loader network.RequestID
	var errText string
	// Navigation is capped by the remaining budget: the wait ends, the
	// browser call is not cancelled (the supervisor closes the browser).
	nctx, cancel := context.WithDeadline(ctx, a.until)
	defer cancel()
	err := chromedp.Run(nctx, chromedp.ActionFunc(func(ctx context.Context) error {
		_, l, et, _, err := page.Navigate(doc.String()).Do(ctx)
		loader, errText = network.RequestID(l), et
		a.loader = l
		return err
	}))
	if err != nil && nctx.Err() != nil && ctx.Err() == nil {
		return rc.NewError(rc.CodeDeadlineExceeded, rc.StageNavigation, "preview document did not commit before the deadline")
	}
	if err != nil {
		return rc.NewError(rc.CodeBrowserLost, rc.StageNavigation, "browser stopped answering during navigation")
	}
	if errText != "" {
		if strings.Contains(errText, "BLOCKED_BY_CLIENT") {
			return rc.NewError(rc.CodeContractMismatch, rc.StageNavigation, "preview document redirected outside the allowed origins")
		}
		return rc.NewError(rc.CodeServiceUnavailable, rc.StageNavigation, "preview host unreachable (%s)", clip(errText, 60))
	}
	// The document's response event precedes the navigation answer;
	// give the event loop a moment in case it is still being handled.
	var status int64
	for i := 0; i < 100; i++ {
		a.mu.Lock()
		status = a.docResp[loader]
		a.mu.Unlock()
		if status != 0 {
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	switch {
	case status == 0 || status/100 == 2:
		return nil
	case status == 401 || status == 403 || status == 404 || status == 410:
		return rc.NewError(rc.CodeInputExpired, rc.StageNavigation, "preview host refused the artifact (HTTP %d)", status)
	default:
		return rc.NewError(rc.CodeServiceUnavailable, rc.StageNavigation, "preview host answered HTTP %d", status)
	}
}

// finishAnimations runs before a capture: Web Animations started by script
// are not covered by the CSS policy.
// It runs in the isolated world: content cannot replace getAnimations there.
const finishAnimations = `(() => { for (const an of document.getAnimations()) { try { an.finish(); } catch (e) { an.cancel(); } } return "done"; })()`

func (a *attempt) capture(ctx context.Context, st *rc.ReadyState) *rc.Error {
	if st.Mount == rc.MountFailed {
		return rc.NewError(rc.CodeContentError, rc.StageCapture, "content failed to mount")
	}
	for _, f := range st.ContentFaults {
		if f.Blocking {
			return rc.NewError(rc.CodeContentError, rc.StageCapture, "blocking content fault %s: %s", clip(f.Code, 64), clip(f.Message, 200))
		}
	}
	var ok string
	if err := a.inIsolatedWorld(ctx, finishAnimations, &ok); err != nil && ctx.Err() != nil {
		return rc.NewError(rc.CodeBrowserLost, rc.StageCapture, "browser stopped answering before capture")
	}
	// Finishing animations can start loads (a final frame's image); the
	// capture waits for readiness once more.
	if _, e := a.waitReady(ctx, rc.DefaultScene); e != nil {
		return e
	}
	var buf []byte
	err := chromedp.Run(ctx, chromedp.ActionFunc(func(ctx context.Context) error {
		var err error
		buf, err = page.CaptureScreenshot().WithFormat(page.CaptureScreenshotFormatPng).
			WithFromSurface(true).WithCaptureBeyondViewport(false).Do(ctx)
		return err
	}))
	if err != nil {
		return rc.NewError(rc.CodeBrowserLost, rc.StageCapture, "browser failed to capture")
	}
	if int64(len(buf)) > rc.MaxPNGBytes {
		return rc.NewError(rc.CodeOutputLimitExceeded, rc.StageCapture, "capture is %d bytes, limit %d", len(buf), rc.MaxPNGBytes)
	}
	cfg, err := png.DecodeConfig(bytes.NewReader(buf))
	if err != nil {
		return rc.NewError(rc.CodeInternal, rc.StageCapture, "browser returned no valid PNG")
	}
	// A document committed in the top frame before the capture would be
	// what the capture shows.
	if a.ch.look(a.loader).away {
		return errNavigatedAway(rc.StageCapture)
	}
	wantW, wantH := a.job.Viewport.PhysicalSize()
	if cfg.Width != wantW || cfg.Height != wantH {
		return rc.NewError(rc.CodeInternal, rc.StageCapture, "capture is %dx%d, expected %dx%d", cfg.Width, cfg.Height, wantW, wantH)
	}
	if err := a.w.SendArtifact(ArtifactFrame{Name: rc.ArtifactCapture, Width: cfg.Width, Height: cfg.Height}, buf); err != nil {
		return rc.NewError(rc.CodeResultLost, rc.StageResult, "artifact not handed to the supervisor")
	}
	return nil
}

// logWriter forwards browser output lines to the child's log.
type logWriter struct{ logf func(string, ...any) }

func (l logWriter) Write(p []byte) (int, error) {
	l.logf("browser: %s", strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
