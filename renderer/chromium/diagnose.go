package chromium

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/chromedp/chromedp"

	"slidecells/shared/digest"
	rc "slidecells/shared/rendercontract"
)

//go:embed diagnose.js
var diagnoseJS string

// DiagnosticsScriptVersion identifies the layout analysis; it is part of
// the RenderProfile.
var DiagnosticsScriptVersion = digest.Bytes([]byte(diagnoseJS))

// maxItems bounds the findings of one diagnosis across scenes.
const maxItems = 500

// scriptOutput is diagnose.js's answer. Counts count every finding of the
// scene, Findings keeps errors first and may be cut (Truncated); Incomplete
// says a check could not look at every element.
type scriptOutput struct {
	Layout     rc.Layout        `json:"layout"`
	Findings   []rc.Finding     `json:"findings"`
	Counts     rc.FindingCounts `json:"counts"`
	Truncated  bool             `json:"truncated"`
	Incomplete bool             `json:"incomplete"`
}

// sceneList is the scenes a diagnosis runs: default alone for a page;
// for a component default plus the requested scenes, or, when none were
// requested, default plus every scene the host declares, at most
// rc.MaxScenes in all: declared is how many there were (the host allows
// more than one request may run; the diagnosis then reports the scenes it
// did not run as an error finding, so it neither passes nor stays
// unavailable).
func (a *attempt) sceneList(first *rc.ReadyState) (scenes []string, declared int) {
	if a.job.Operation != rc.OpComponentDiagnose {
		return []string{rc.DefaultScene}, 1
	}
	if len(a.job.Scenes) > 0 {
		scenes = rc.OperationOptions{Scenes: a.job.Scenes}.SceneList()
		return scenes, len(scenes)
	}
	scenes = rc.OperationOptions{Scenes: first.Scenes}.SceneList()
	return scenes[:min(len(scenes), rc.MaxScenes)], len(scenes)
}

// sceneSwitchExpr dispatches a scene switch request to the host.
func sceneSwitchExpr(req rc.SceneSwitchRequest) string {
	b, _ := json.Marshal(req)
	return fmt.Sprintf(`window.dispatchEvent(new CustomEvent(%q, {detail: %s})), true`, rc.SceneSwitchEvent, b)
}

func (a *attempt) diagnose(ctx context.Context, first *rc.ReadyState) *rc.Error {
	scenes, declared := a.sceneList(first)
	d := rc.Diagnosis{
		SchemaVersion: rc.DiagnosisSchemaVersion,
		Operation:     a.job.Operation,
		ArtifactID:    first.ArtifactID,
		Viewport:      a.job.Viewport,
		Items:         []rc.Finding{},
	}
	var all []rc.Finding
	// counts counts every finding, those the script left out included.
	var counts rc.FindingCounts
	count := func(fs ...rc.Finding) {
		for _, f := range fs {
			switch f.Severity {
			case rc.SeverityError:
				counts.Error++
			case rc.SeverityWarning:
				counts.Warning++
			default:
				counts.Info++
			}
		}
	}
	incomplete := false
	if declared > len(scenes) {
		f := rc.Finding{Severity: rc.SeverityError, Code: rc.FindingScenesOverLimit, Scene: rc.DefaultScene,
			Message: fmt.Sprintf("the component declares %d scenes; one diagnosis runs at most %d (default and the first %d declared): name the scenes to check the others",
				declared, rc.MaxScenes, rc.MaxScenes-1),
			Evidence: rc.Evidence{Value: fmt.Sprint(declared)}}
		all = append(all, f)
		count(f)
		d.Truncated = true
	}
	st := first
	for i, scene := range scenes {
		report := rc.SceneReport{Scene: scene, RuntimeErrors: []rc.RuntimeError{}, ContentFaults: []rc.ContentFault{}}
		if scene != rc.DefaultScene {
			var e *rc.Error
			var ok bool
			st, ok, e = a.switchScene(ctx, st, scene, fmt.Sprintf("sw_%d", i))
			if e != nil {
				return e
			}
			if !ok {
				f := rc.Finding{Severity: rc.SeverityError, Code: rc.FindingSceneFailed, Scene: scene,
					Message: "the host could not show this scene", Evidence: rc.Evidence{Value: scene}}
				all = append(all, f)
				count(f)
				report.RuntimeErrors = a.takeErrors(scene)
				d.Scenes = append(d.Scenes, report)
				continue
			}
		}
		// The analysis runs in the isolated world, where content cannot
		// replace getBoundingClientRect, getComputedStyle or JSON.
		var raw string
		args, _ := json.Marshal(map[string]any{"scene": scene, "width": a.job.Viewport.Width, "height": a.job.Viewport.Height})
		if err := a.inIsolatedWorld(ctx, diagnoseJS+"("+string(args)+")", &raw); err != nil {
			if ctx.Err() != nil {
				return rc.NewError(rc.CodeBrowserLost, rc.StageDiagnose, "browser stopped answering during layout analysis")
			}
			if a.ch.look(a.loader).away {
				return errNavigatedAway(rc.StageDiagnose)
			}
			a.logf("layout analysis: %v", err)
			return rc.NewError(rc.CodeInternal, rc.StageDiagnose, "layout analysis did not run")
		}
		if a.ch.look(a.loader).away {
			return errNavigatedAway(rc.StageDiagnose)
		}
		var out scriptOutput
		if err := json.Unmarshal([]byte(raw), &out); err != nil {
			return rc.NewError(rc.CodeInternal, rc.StageDiagnose, "layout analysis returned an unexpected value")
		}
		layout := out.Layout
		report.Layout = &layout
		report.Completed = true
		all = append(all, out.Findings...)
		if out.Counts.Error+out.Counts.Warning+out.Counts.Info < len(out.Findings) {
			return rc.NewError(rc.CodeInternal, rc.StageDiagnose, "layout analysis counted fewer findings than it kept")
		}
		counts.Error += out.Counts.Error
		counts.Warning += out.Counts.Warning
		counts.Info += out.Counts.Info
		if out.Truncated {
			d.Truncated = true
		}
		if out.Incomplete {
			d.Truncated, incomplete = true, true
		}
		var extra []rc.Finding
		if st.Mount == rc.MountFailed {
			extra = append(extra, rc.Finding{Severity: rc.SeverityError, Code: rc.FindingMountFailed, Scene: scene, Message: "content failed to mount"})
		}
		for _, f := range st.ContentFaults {
			if f.Scene != "" && f.Scene != scene {
				continue
			}
			report.ContentFaults = append(report.ContentFaults, f)
			sev := rc.SeverityWarning
			if f.Blocking {
				sev = rc.SeverityError
			}
			extra = append(extra, rc.Finding{Severity: sev, Code: rc.FindingContentFault, Scene: scene,
				Message: clip(f.Message, 300), Evidence: rc.Evidence{Value: clip(f.Code, 64)}, Truncated: len(f.Message) > 300})
		}
		// Give the page a beat to report errors of this scene before
		// they are attributed.
		report.RuntimeErrors = a.takeErrors(scene)
		for _, re := range report.RuntimeErrors {
			extra = append(extra, rc.Finding{Severity: rc.SeverityError, Code: rc.FindingRuntimeError, Scene: scene,
				Message: re.Message, Truncated: re.Truncated})
		}
		all = append(all, extra...)
		count(extra...)
		d.Scenes = append(d.Scenes, report)
	}
	d.Counts = counts
	// A check that could not look at everything cannot report that there is
	// no problem (render-execution.md, "Limits": truncation that affects
	// completeness fails the execution). With errors found, the verdict
	// stands whatever was left out.
	if incomplete && counts.Error == 0 {
		return rc.NewError(rc.CodeOutputLimitExceeded, rc.StageDiagnose,
			"the content has more elements than the layout analysis checks; it cannot be reported free of problems")
	}
	// Errors first, then warnings, then infos, so a cut drops the least
	// severe; counts stay complete.
	all = mostSevereFirst(all)
	if len(all) > maxItems {
		all = all[:maxItems]
		d.Truncated = true
	}
	d.Items = append(d.Items, all...)
	if d.Truncated {
		d.Items = append(d.Items, rc.Finding{Severity: rc.SeverityWarning, Code: rc.FindingItemsTruncated,
			Message: "some findings or layout facts were left out; counts are complete", Truncated: true})
	}
	body, e := encodeBounded(&d)
	if e != nil {
		return e
	}
	if a.ch.look(a.loader).away {
		return errNavigatedAway(rc.StageDiagnose)
	}
	if err := a.w.SendArtifact(ArtifactFrame{Name: rc.ArtifactDiagnosis}, body); err != nil {
		return rc.NewError(rc.CodeResultLost, rc.StageResult, "artifact not handed to the supervisor")
	}
	return nil
}

// mostSevereFirst orders findings errors, warnings, infos, keeping the order
// within a severity.
func mostSevereFirst(all []rc.Finding) []rc.Finding {
	rank := map[rc.Severity]int{rc.SeverityError: 0, rc.SeverityWarning: 1, rc.SeverityInfo: 2}
	sort.SliceStable(all, func(i, j int) bool { return rank[all[i].Severity] < rank[all[j].Severity] })
	return all
}

// encodeBounded fits the diagnosis into the contract limit by dropping
// layout detail first; findings are the last thing to go, and if they do
// not fit the execution fails rather than reporting fewer problems.
func encodeBounded(d *rc.Diagnosis) ([]byte, *rc.Error) {
	for attempt := 0; attempt < 4; attempt++ {
		b, err := json.Marshal(d)
		if err != nil {
			return nil, rc.NewError(rc.CodeInternal, rc.StageDiagnose, "diagnosis not encodable")
		}
		if len(b) <= rc.MaxDiagnosisBytes {
			return b, nil
		}
		d.Truncated = true
		for i := range d.Scenes {
			if l := d.Scenes[i].Layout; l != nil {
				l.Truncated = true
				switch attempt {
				case 0:
					l.TextBlocks = l.TextBlocks[:len(l.TextBlocks)/4]
					l.Relations = l.Relations[:len(l.Relations)/4]
				default:
					l.TextBlocks, l.Relations, l.Groups = nil, nil, nil
				}
			}
		}
	}
	return nil, rc.NewError(rc.CodeOutputLimitExceeded, rc.StageDiagnose, "diagnosis exceeds %d bytes even without layout detail", rc.MaxDiagnosisBytes)
}

func (a *attempt) takeErrors(scene string) []rc.RuntimeError {
	time.Sleep(pollInterval)
	a.mu.Lock()
	defer a.mu.Unlock()
	errs := a.errors[scene]
	if errs == nil {
		errs = []rc.RuntimeError{}
	}
	return errs
}

// switchScene asks the host for a scene and waits for its receipt and for
// the scene's readiness. ok is false when the host could not show it.
func (a *attempt) switchScene(ctx context.Context, st *rc.ReadyState, scene, requestID string) (*rc.ReadyState, bool, *rc.Error) {
	known := false
	for _, s := range st.Scenes {
		if s == scene {
			known = true
		}
	}
	if !known {
		return st, false, nil
	}
	a.mu.Lock()
	a.scene = scene
	a.mu.Unlock()
	// The request is dispatched in the page's main world, where the host's
	// bootstrap listens. Content that broke window.dispatchEvent or
	// CustomEvent there broke its own scene switch: the scene fails, it is
	// not an infrastructure fault.
	var ok bool
	if err := chromedp.Run(ctx, chromedp.Evaluate(sceneSwitchExpr(rc.SceneSwitchRequest{Scene: scene, RequestID: requestID}), &ok)); err != nil {
		if ctx.Err() != nil {
			return st, false, rc.NewError(rc.CodeBrowserLost, rc.StageDiagnose, "browser stopped answering during a scene switch")
		}
		a.logf("scene switch not dispatched: %v", clip(err.Error(), 200))
		return st, false, nil
	}
	for {
		cur, e := a.waitReady(ctx, "")
		if e != nil {
			return cur, false, e
		}
		if r, found := cur.Receipt(requestID); found {
			if r.State == rc.SceneFailed {
				return cur, false, nil
			}
			next, e := a.waitReady(ctx, scene)
			return next, e == nil, e
		}
		if time.Now().After(a.until) {
			return cur, false, rc.NewError(rc.CodeDeadlineExceeded, rc.StageDiagnose, "scene %s not shown before the deadline", scene)
		}
		time.Sleep(pollInterval)
	}
}
