package chromium

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/chromedp/chromedp"

	rc "slidecells/shared/rendercontract"
)

// readExpr reads the readiness object with a fixed expression. The object is
// copied through JSON so functions and cycles cannot confuse the reader.
const readExpr = `(() => {
  const r = window.` + rc.ReadyGlobal + `;
  let s = null;
  if (r !== undefined && r !== null) {
    try { s = JSON.parse(JSON.stringify(r)); } catch (e) { s = "unserializable"; }
  }
  return JSON.stringify({doc: document.readyState, fonts: document.fonts ? document.fonts.status : "loaded", state: s});
})()`

type snapshot struct {
	Doc   string          `json:"doc"`
	Fonts string          `json:"fonts"`
	State json.RawMessage `json:"state"`
}

// pollInterval is how often readiness is read; each read is one DevTools
// round trip of well under a millisecond.
const pollInterval = 10 * time.Millisecond

// missingPolls is how many reads after the load event may still find no
// readiness object before it counts as missing (the protocol requires it
// before load; this absorbs the event's own timing).
const missingPolls = 5

// expect is what the host must report.
type expect struct {
	artifactID, inputDigest, hostBuild string
}

// readiness reads the state until it is settled: ready, or failed in a way
// that waiting cannot change. It returns the last state read.
func waitReady(ctx context.Context, until time.Time, exp expect, scene string) (*rc.ReadyState, *rc.Error) {
	missing := 0
	var last *rc.ReadyState
	for {
		var raw string
		if err := chromedp.Run(ctx, chromedp.Evaluate(readExpr, &raw)); err != nil {
			return last, rc.NewError(rc.CodeBrowserLost, rc.StageReadiness, "browser stopped answering while reading readiness")
		}
		var snap snapshot
		if err := json.Unmarshal([]byte(raw), &snap); err != nil {
			return last, rc.NewError(rc.CodeInternal, rc.StageReadiness, "readiness read returned an unexpected value")
		}
		switch {
		case len(snap.State) == 0 || string(snap.State) == "null":
			if snap.Doc == "complete" {
				missing++
				if missing >= missingPolls {
					return nil, rc.NewError(rc.CodeContractMismatch, rc.StageReadiness, "preview document loaded without publishing %s (window.%s)", rc.ReadinessProtocol, rc.ReadyGlobal)
				}
			}
		default:
			var st rc.ReadyState
			if err := json.Unmarshal(snap.State, &st); err != nil {
				return nil, rc.NewError(rc.CodeContractMismatch, rc.StageReadiness, "%s object is undeterminable", rc.ReadinessProtocol)
			}
			last = &st
			if msg, ok := st.CheckShape(); !ok {
				return last, rc.NewError(rc.CodeContractMismatch, rc.StageReadiness, "%s", msg)
			}
			if e := settled(&st, snap.Fonts, exp, scene); e != nil || ready(&st, snap.Fonts, scene) {
				return last, e
			}
		}
		if time.Now().After(until) {
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
		time.Sleep(pollInterval)
	}
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
