package preview

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/page"
	cdpruntime "github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"slidecells/renderer/chromium"
	rc "slidecells/shared/rendercontract"
)

// The tests open preview documents in Debian's headless Chromium and read the readiness state
// the way the renderer does (the channel protocol): a CDP binding __renderReadyV1 added before
// navigation, trusted only when called from the default (main-world) context of the top frame;
// the preview-access token attached as a header to the document request only; document.fonts
// read in an isolated world.

const chromiumPath = "/usr/lib/chromium/chromium"

var (
	browserOnce   sync.Once
	browserCtx    context.Context
	browserCancel context.CancelFunc
	browserErr    error
)

func browser(t testing.TB) context.Context {
	t.Helper()
	if testing.Short() {
		t.Skip("browser tests need Debian's chromium; -short skips them")
	}
	browserOnce.Do(func() {
		if _, err := os.Stat(chromiumPath); err != nil {
			browserErr = fmt.Errorf("Debian's chromium is not installed at %s (.ci/run installs it): %v", chromiumPath, err)
			return
		}
		// The renderer's launch flags, without its egress proxy. Tests only, run as root:
		// the renderer never runs the browser without its sandbox.
		opts := append(chromium.Options(append(chromium.FixedFlags(), "no-sandbox")),
			chromedp.ExecPath(chromiumPath), chromedp.UserDataDir(mustTempDir()))
		alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
		ctx, cancel := chromedp.NewContext(alloc)
		if err := chromedp.Run(ctx); err != nil {
			cancel()
			cancelAlloc()
			browserErr = fmt.Errorf("start chromium: %w", err)
			return
		}
		browserCtx = ctx
		browserCancel = func() { cancel(); cancelAlloc() }
	})
	if browserErr != nil {
		t.Fatal(browserErr)
	}
	return browserCtx
}

func mustTempDir() string {
	d, err := os.MkdirTemp("", "preview-chromium-*")
	if err != nil {
		panic(err)
	}
	return d
}

func closeBrowser() {
	if browserCancel != nil {
		browserCancel()
	}
}

// tab is one page opened like the renderer opens it.
type tab struct {
	t        testing.TB
	ctx      context.Context
	topFrame cdp.FrameID

	mu        sync.Mutex
	contexts  map[cdpruntime.ExecutionContextID]contextAux
	trusted   []string // payloads from the top frame's main world
	untrusted []string // binding calls from anywhere else
	docHeader map[string]bool
	fetched   map[string]int // requests per URL
	console   []string       // console messages and exceptions, shown when a wait fails

	// hold: requests whose URL contains it wait until release is closed (nil: none wait).
	hold    string
	release chan struct{}
}

type contextAux struct {
	IsDefault bool   `json:"isDefault"`
	FrameID   string `json:"frameId"`
}

// open navigates a fresh tab to docURL with the token attached to that exact URL only.
func open(t testing.TB, docURL, token string, width, height int) *tab {
	t.Helper()
	return openWith(t, docURL, token, width, height, true)
}

// openWith opens a tab, with or without the binding (an ordinary browser has none).
func openWith(t testing.TB, docURL, token string, width, height int, binding bool) *tab {
	t.Helper()
	return openTab(t, docURL, token, width, height, binding, "")
}

// openHeld opens a tab whose requests for URLs containing hold wait until the returned
// function is called (a slow resource, without a timer).
func openHeld(t testing.TB, docURL, token string, width, height int, hold string) (*tab, func()) {
	t.Helper()
	tb := openTab(t, docURL, token, width, height, true, hold)
	var once sync.Once
	release := func() { once.Do(func() { close(tb.release) }) }
	t.Cleanup(release)
	return tb, release
}

func openTab(t testing.TB, docURL, token string, width, height int, binding bool, hold string) *tab {
	t.Helper()
	ctx, cancel := chromedp.NewContext(browser(t))
	t.Cleanup(cancel)
	ctx, cancelT := context.WithTimeout(ctx, 90*time.Second)
	t.Cleanup(cancelT)
	if err := chromedp.Run(ctx); err != nil {
		t.Fatal(err)
	}
	tb := &tab{t: t, ctx: ctx, topFrame: cdp.FrameID(chromedp.FromContext(ctx).Target.TargetID),
		contexts: map[cdpruntime.ExecutionContextID]contextAux{}, docHeader: map[string]bool{}, fetched: map[string]int{}, hold: hold, release: make(chan struct{})}
	chromedp.ListenTarget(ctx, func(ev any) {
		switch ev := ev.(type) {
		case *cdpruntime.EventExecutionContextCreated:
			var aux contextAux
			_ = json.Unmarshal(ev.Context.AuxData, &aux)
			tb.mu.Lock()
			tb.contexts[ev.Context.ID] = aux
			tb.mu.Unlock()
		case *cdpruntime.EventBindingCalled:
			if ev.Name != "__renderReadyV1" {
				return
			}
			tb.mu.Lock()
			aux, ok := tb.contexts[ev.ExecutionContextID]
			if ok && aux.IsDefault && aux.FrameID == string(tb.topFrame) {
				tb.trusted = append(tb.trusted, ev.Payload)
			} else {
				tb.untrusted = append(tb.untrusted, ev.Payload)
			}
			tb.mu.Unlock()
		case *cdpruntime.EventConsoleAPICalled:
			var parts []string
			for _, a := range ev.Args {
				parts = append(parts, string(a.Value)+a.Description)
			}
			tb.mu.Lock()
			tb.console = append(tb.console, string(ev.Type)+": "+strings.Join(parts, " "))
			tb.mu.Unlock()
		case *cdpruntime.EventExceptionThrown:
			tb.mu.Lock()
			tb.console = append(tb.console, "exception: "+ev.ExceptionDetails.Text+" "+describeExc(ev.ExceptionDetails))
			tb.mu.Unlock()
		case *fetch.EventRequestPaused:
			go tb.continueRequest(ev, docURL, token)
		}
	})
	var bind chromedp.Action = chromedp.ActionFunc(func(context.Context) error { return nil })
	if binding {
		bind = cdpruntime.AddBinding("__renderReadyV1")
	}
	err := chromedp.Run(ctx,
		cdpruntime.Enable(),
		bind,
		fetch.Enable().WithPatterns([]*fetch.RequestPattern{{URLPattern: "*", RequestStage: fetch.RequestStageRequest}}),
		emulation.SetDeviceMetricsOverride(int64(width), int64(height), 1, false),
		emulation.SetEmulatedMedia().WithFeatures([]*emulation.MediaFeature{{Name: "prefers-reduced-motion", Value: "reduce"}}),
		chromedp.ActionFunc(func(ctx context.Context) error {
			_, _, errText, _, err := page.Navigate(docURL).Do(ctx)
			if err == nil && errText != "" {
				err = fmt.Errorf("navigation: %s", errText)
			}
			return err
		}),
	)
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

func (tb *tab) continueRequest(ev *fetch.EventRequestPaused, docURL, token string) {
	c := chromedp.FromContext(tb.ctx)
	exec := cdp.WithExecutor(tb.ctx, c.Target)
	withToken := ev.Request.URL == docURL && token != ""
	tb.mu.Lock()
	tb.docHeader[ev.Request.URL] = withToken
	tb.fetched[ev.Request.URL]++
	tb.mu.Unlock()
	if tb.hold != "" && strings.Contains(ev.Request.URL, tb.hold) {
		select {
		case <-tb.release:
		case <-tb.ctx.Done():
			return
		}
	}
	if !withToken {
		_ = fetch.ContinueRequest(ev.RequestID).Do(exec)
		return
	}
	headers := []*fetch.HeaderEntry{{Name: rc.PreviewAccessHeader, Value: token}}
	for k, v := range ev.Request.Headers {
		if s, ok := v.(string); ok {
			headers = append(headers, &fetch.HeaderEntry{Name: k, Value: s})
		}
	}
	_ = fetch.ContinueRequest(ev.RequestID).WithHeaders(headers).Do(exec)
}

// payloads returns what the channel delivered so far.
func (tb *tab) payloads() (trusted, untrusted []string) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	return append([]string(nil), tb.trusted...), append([]string(nil), tb.untrusted...)
}

// state is the latest trusted state; every trusted payload must be valid render-ready.v1.
func (tb *tab) state() *rc.ReadyState {
	tb.t.Helper()
	tr, _ := tb.payloads()
	if len(tr) == 0 {
		return nil
	}
	var st rc.ReadyState
	dec := json.NewDecoder(strings.NewReader(tr[len(tr)-1]))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&st); err != nil {
		tb.t.Fatalf("the channel sent something that is not render-ready.v1: %v\n%s", err, tr[len(tr)-1])
	}
	if msg, ok := st.CheckShape(); !ok {
		tb.t.Fatalf("undeterminable state: %s\n%s", msg, tr[len(tr)-1])
	}
	return &st
}

// wait polls the state until cond holds (bounded; the bound is not what is tested).
func (tb *tab) wait(what string, cond func(*rc.ReadyState) bool) *rc.ReadyState {
	tb.t.Helper()
	deadline := time.Now().Add(45 * time.Second)
	for {
		st := tb.state()
		if st != nil && cond(st) {
			return st
		}
		if time.Now().After(deadline) {
			tr, _ := tb.payloads()
			last := "(nothing)"
			if len(tr) > 0 {
				last = tr[len(tr)-1]
			}
			tb.mu.Lock()
			console := strings.Join(tb.console, "\n")
			tb.mu.Unlock()
			tb.t.Fatalf("waiting for %s: last state %s\nconsole:\n%s", what, last, console)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// settled: initialised (or failed) and the current scene mounted or failed with nothing pending.
func settled(st *rc.ReadyState) bool {
	return st.Init == rc.InitFailed || (st.Init == rc.InitOK && st.Mount != rc.MountPending && st.Resources.Pending() == 0)
}

// isolated evaluates expr in a fresh isolated world of the top frame, whose globals content
// cannot touch, and decodes the JSON-able result into out.
func (tb *tab) isolated(expr string, out any) {
	tb.t.Helper()
	err := chromedp.Run(tb.ctx, chromedp.ActionFunc(func(ctx context.Context) error {
		id, err := page.CreateIsolatedWorld(tb.topFrame).WithWorldName("probe").Do(ctx)
		if err != nil {
			return err
		}
		res, exc, err := cdpruntime.Evaluate(expr).WithContextID(id).WithReturnByValue(true).WithAwaitPromise(true).Do(ctx)
		if err != nil {
			return err
		}
		if exc != nil {
			return fmt.Errorf("isolated evaluation threw: %s", exc.Text)
		}
		return json.Unmarshal(res.Value, out)
	}))
	if err != nil {
		tb.t.Fatal(err)
	}
}

// switchScene asks for a scene the way the renderer does.
func (tb *tab) switchScene(scene, requestID string) {
	tb.t.Helper()
	expr := fmt.Sprintf(`window.dispatchEvent(new CustomEvent(%q, {detail: {scene: %q, request_id: %q}}))`, rc.SceneSwitchEvent, scene, requestID)
	if err := chromedp.Run(tb.ctx, chromedp.Evaluate(expr, nil)); err != nil {
		tb.t.Fatal(err)
	}
}

func (tb *tab) receipt(requestID string) *rc.ReadyState {
	tb.t.Helper()
	return tb.wait("the receipt of "+requestID, func(st *rc.ReadyState) bool {
		_, ok := st.Receipt(requestID)
		return ok && st.Mount != rc.MountPending
	})
}

// evalMain evaluates expr in the page's main world, as content sees it.
func evalMain(t testing.TB, tb *tab, expr string, out any) {
	t.Helper()
	if err := chromedp.Run(tb.ctx, chromedp.Evaluate(expr, out)); err != nil {
		t.Fatal(err)
	}
}

func jsonUnmarshal(s string, v any) error { return json.Unmarshal([]byte(s), v) }

func sleep() { time.Sleep(20 * time.Millisecond) }

func describeExc(d *cdpruntime.ExceptionDetails) string {
	if d.Exception != nil {
		return d.Exception.Description
	}
	return ""
}
