package chromium

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/chromedp/cdproto/page"
	cdpruntime "github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	rc "slidecells/shared/rendercontract"
)

// isolatedWorldName names the renderer's isolated world in the preview
// document. Content cannot reach its globals or prototypes; it shares only
// the DOM.
const isolatedWorldName = "render-inspect"

// inspectExpr reads, in the isolated world, the document facts the renderer
// needs besides the host's state: content can redefine document.fonts or
// Document.prototype.readyState in its own world, not in this one.
const inspectExpr = `JSON.stringify({doc: document.readyState, fonts: document.fonts ? document.fonts.status : "loaded"})`

type inspection struct {
	Doc   string `json:"doc"`
	Fonts string `json:"fonts"`
}

// pollInterval is how long readiness waits between checks when the channel
// brings nothing new; each check is one DevTools round trip of well under a
// millisecond. The poll remains for the facts that are read, not pushed
// (document.readyState, the fonts' status).
const pollInterval = 10 * time.Millisecond

// missingPolls is how many checks after the load event may still find no
// state on the channel before the protocol counts as missing (the host sends
// its first state before any content runs; this absorbs the event's timing).
// Only checks that followed a full poll interval count (see pacer).
const missingPolls = 5

// pacer paces the readiness reads of one wait: the next read starts when the
// channel changes (a state arrived, the document committed or was left) or,
// failing that, after pollInterval.
type pacer struct {
	timer *time.Timer
	// woken: the current read was started early by a change on the
	// channel.
	woken bool
	// missing counts the reads that found the document complete and no
	// state on the channel.
	missing int
	// reads and wakes count reads and early starts, for the log.
	reads, wakes int
}

func newPacer() *pacer {
	t := time.NewTimer(pollInterval)
	t.Stop()
	return &pacer{timer: t}
}

// wait blocks until changed is closed or pollInterval has passed.
func (p *pacer) wait(changed <-chan struct{}) {
	p.timer.Reset(pollInterval)
	select {
	case <-changed:
		p.timer.Stop()
		p.woken = true
		p.wakes++
	case <-p.timer.C:
		p.woken = false
	}
}

// noState records a read that found the document complete with no state on
// the channel, and reports whether the protocol now counts as missing. A read
// started early by a change does not count: changes, however many, do not
// shorten the time the host has to send its first state below missingPolls
// poll intervals.
func (p *pacer) noState() bool {
	if !p.woken {
		p.missing++
	}
	return p.missing >= missingPolls
}

// maxWorldFailures bounds consecutive failed reads in the isolated world
// (each failure makes a new world, which is what a document that was not yet
// committed when the world was made needs).
const maxWorldFailures = 50

// expect is what the host must report.
type expect struct {
	artifactID, inputDigest, hostBuild string
}

// errNavigatedAway: the top frame committed another document. Content did
// that (the host never navigates), and nothing the new document says is
// trusted.
func errNavigatedAway(stage rc.Stage) *rc.Error {
	return rc.NewError(rc.CodeContentError, stage, "the preview document navigated the top frame to another document")
}

// inIsolatedWorld evaluates expr in the renderer's isolated world of the top
// frame, making the world on first use and again after a failure (a world
// made before the document committed dies with the old document).
func (a *attempt) inIsolatedWorld(ctx context.Context, expr string, out *string) error {
	if a.world == 0 {
		err := chromedp.Run(ctx, chromedp.ActionFunc(func(ctx context.Context) error {
			id, err := page.CreateIsolatedWorld(a.topFrame).WithWorldName(isolatedWorldName).Do(ctx)
			a.world = id
			return err
		}))
		if err != nil {
			a.world = 0
			return err
		}
	}
	world := a.world
	err := chromedp.Run(ctx, chromedp.Evaluate(expr, out, func(p *cdpruntime.EvaluateParams) *cdpruntime.EvaluateParams {
		return p.WithContextID(world)
	}))
	if err != nil {
		a.world = 0
	}
	return err
}

// waitReady waits until the trusted state is settled: ready (for scene,
// when given), or failed in a way that waiting cannot change. It returns the
// last trusted state.
func (a *attempt) waitReady(ctx context.Context, scene string) (*rc.ReadyState, *rc.Error) {
	worldFailures := 0
	var last *rc.ReadyState
	pace := newPacer()
	began := time.Now()
	defer func() {
		a.logf("readiness wait: %d reads (%d started by the channel) in %s", pace.reads, pace.wakes, time.Since(began).Round(time.Millisecond))
	}()
	// Reads end with the budget; the browser call itself is not
	// cancelled (the supervisor closes the browser).
	rctx, cancel := context.WithDeadline(ctx, a.until)
	defer cancel()
	// The content budget (per readiness wait) starts with the committed document; a read that
	// hangs (the page's main thread in an endless loop) ends with it.
	readCtx, endReads := context.WithCancel(rctx)
	defer endReads()
	var contentUntil time.Time
	for {
		before := a.ch.look(a.loader)
		if before.state != nil {
			last = before.state
		}
		if e := channelFault(before); e != nil {
			return last, e
		}
		if before.committed && contentUntil.IsZero() && a.job.ContentReady > 0 && time.Now().Add(a.job.ContentReady).Before(a.until) {
			contentUntil = time.Now().Add(a.job.ContentReady)
			defer time.AfterFunc(a.job.ContentReady, endReads).Stop()
		}
		if before.committed {
			var raw string
			pace.reads++
			err := a.inIsolatedWorld(readCtx, inspectExpr, &raw)
			switch {
			case err != nil && ctx.Err() != nil:
				return last, rc.NewError(rc.CodeBrowserLost, rc.StageReadiness, "browser stopped answering while reading readiness")
			case err != nil && readCtx.Err() != nil:
				// The budget ran out during the read: reported below.
			case err != nil:
				worldFailures++
				if worldFailures >= maxWorldFailures {
					a.logf("isolated world read: %v", err)
					return last, rc.NewError(rc.CodeInternal, rc.StageReadiness, "the preview document could not be inspected")
				}
			default:
				worldFailures = 0
				var in inspection
				if err := json.Unmarshal([]byte(raw), &in); err != nil {
					return last, rc.NewError(rc.CodeInternal, rc.StageReadiness, "readiness read returned an unexpected value")
				}
				// The state must not have changed during the read, or
				// the fonts fact may belong to another moment.
				after := a.ch.look(a.loader)
				if after.state != nil {
					last = after.state
				}
				if e := channelFault(after); e != nil {
					return last, e
				}
				switch {
				case after.state == nil:
					if in.Doc == "complete" && pace.noState() {
						return nil, rc.NewError(rc.CodeContractMismatch, rc.StageReadiness, "preview document loaded without sending %s on the readiness channel (%s)", rc.ReadinessProtocol, rc.ReadyBinding)
					}
				case after.seq == before.seq:
					st := after.state
					if e := settled(st, in.Fonts, a.exp, scene); e != nil || ready(st, in.Fonts, scene) {
						return st, e
					}
				}
			}
		}
		if !contentUntil.IsZero() && time.Now().After(contentUntil) {
			return last, contentNotReady(a.job.ContentReady, last)
		}
		if time.Now().After(a.until) {
			e := rc.NewError(rc.CodeDeadlineExceeded, rc.StageReadiness, "preview not ready before the deadline")
			if last != nil {
				res := last.Resources
				e.Resources = &res
				if last.Resources.Pending() > 0 {
					e.Message = fmt.Sprintf("preview not ready before the deadline: %d resources still pending", last.Resources.Pending())
				}
			}
			return last, e
		}
		// Waiting on the view taken before the read: a state that came
		// during the read (not judged, see above) starts the next read at
		// once.
		pace.wait(before.changed)
	}
}

// contentNotReady is the content error of a committed page that did not become ready within
// its content budget: final for that input (the same input is not retried).
func contentNotReady(budget time.Duration, last *rc.ReadyState) *rc.Error {
	msg := fmt.Sprintf("the page did not become ready within %s", budget.Round(time.Second))
	if last == nil {
		msg += " (it never reported its readiness: its script may run an endless loop)"
	} else if n := last.Resources.Pending(); n > 0 {
		msg += fmt.Sprintf(" (%d resources still pending)", n)
	}
	e := rc.NewError(rc.CodeContentError, rc.StageReadiness, "%s", msg)
	if last != nil {
		res := last.Resources
		e.Resources = &res
	}
	return e
}

// channelFault is the error of a view that waiting cannot fix.
func channelFault(v view) *rc.Error {
	switch {
	case v.away:
		return errNavigatedAway(rc.StageReadiness)
	case v.broken != "":
		return rc.NewError(rc.CodeContractMismatch, rc.StageReadiness, "%s", v.broken)
	}
	return nil
}

// ready reports whether capture or analysis may run now.
func ready(st *rc.ReadyState, fonts string, scene string) bool {
	return st.Init == rc.InitOK &&
		(st.Mount == rc.MountMounted || st.Mount == rc.MountFailed) &&
		st.Resources.Pending() == 0 && fonts == "loaded" &&
		(scene == "" || st.Scene == scene || (scene == rc.DefaultScene && st.Scene == ""))
}

// settled returns the error of a state that waiting cannot fix.
func settled(st *rc.ReadyState, fonts string, exp expect, scene string) *rc.Error {
	switch st.Init {
	case rc.InitFailed:
		msg := "preview host failed to initialise"
		if st.InitError != nil && st.InitError.Code != "" {
			msg += ": " + clip(st.InitError.Code, 64)
		}
		if st.InitError != nil && st.InitError.Permanent {
			return rc.NewError(rc.CodeInputExpired, rc.StageReadiness, "%s", msg)
		}
		return rc.NewError(rc.CodeServiceUnavailable, rc.StageReadiness, "%s", msg)
	case rc.InitPending:
		return nil
	}
	if st.ArtifactID != exp.artifactID {
		return rc.NewError(rc.CodeInputNotReproducible, rc.StageReadiness, "preview host serves another artifact than requested")
	}
	if st.InputDigest != exp.inputDigest {
		return rc.NewError(rc.CodeInputNotReproducible, rc.StageReadiness, "preview host reports another input digest than requested")
	}
	if exp.hostBuild != "" && st.HostBuild != exp.hostBuild {
		return rc.NewError(rc.CodeProfileMismatch, rc.StageReadiness, "preview host build %s is not the build the render profile requires", clip(st.HostBuild, 64))
	}
	if st.Resources.Pending() == 0 && fonts == "loaded" && st.Resources.Failed() > 0 && (scene == "" || st.Scene == scene) {
		e := rc.NewError(rc.CodeAssetNotReady, rc.StageReadiness, "%d visual resources failed to load", st.Resources.Failed())
		res := st.Resources
		e.Resources = &res
		e.Retryable = true
		for _, f := range st.Resources.Failures {
			if f.Permanent {
				e.Retryable = false
			}
		}
		return e
	}
	return nil
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
