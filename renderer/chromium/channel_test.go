package chromium

import (
	"encoding/json"
	"testing"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	cdpruntime "github.com/chromedp/cdproto/runtime"

	rc "slidecells/shared/rendercontract"
)

func navigated(frame, parent cdp.FrameID, loader cdp.LoaderID) *page.EventFrameNavigated {
	return &page.EventFrameNavigated{Frame: &cdp.Frame{ID: frame, ParentID: parent, LoaderID: loader}}
}

func created(id cdpruntime.ExecutionContextID, frame cdp.FrameID, isDefault bool) *cdpruntime.EventExecutionContextCreated {
	aux, _ := json.Marshal(map[string]any{"isDefault": isDefault, "frameId": frame, "type": "default"})
	return &cdpruntime.EventExecutionContextCreated{Context: &cdpruntime.ExecutionContextDescription{ID: id, AuxData: aux}}
}

func called(ctx cdpruntime.ExecutionContextID, payload string) *cdpruntime.EventBindingCalled {
	return &cdpruntime.EventBindingCalled{Name: rc.ReadyBinding, ExecutionContextID: ctx, Payload: payload}
}

func stateJSON(init, mount string) string {
	b, _ := json.Marshal(rc.ReadyState{Protocol: rc.ReadinessProtocol, ArtifactID: "snap_a", Init: init, Mount: mount})
	return string(b)
}

// TestChannelTrustsOnlyTheTopDocumentsMainWorld feeds the channel browser
// events in the order Chromium sends them.
func TestChannelTrustsOnlyTheTopDocumentsMainWorld(t *testing.T) {
	const top, child = cdp.FrameID("TOP"), cdp.FrameID("CHILD")
	c := newChannel()
	c.setTopFrame(top)
	// The initial about:blank document's world, before our navigation.
	c.handle(created(1, top, true))
	c.handle(called(1, stateJSON(rc.InitOK, rc.MountMounted)))
	c.handle(&cdpruntime.EventExecutionContextsCleared{})
	c.handle(navigated(top, "", "L1"))
	if v := c.look("L1"); !v.committed || v.state != nil || v.away {
		t.Fatalf("before any trusted call: %+v", v)
	}
	c.handle(created(2, top, true))
	c.handle(created(3, top, false)) // an isolated world of the top frame
	c.handle(navigated(child, top, "L9"))
	c.handle(created(4, child, true)) // an iframe's main world
	c.handle(called(2, stateJSON(rc.InitOK, rc.MountPending)))
	for _, ev := range []any{
		called(3, stateJSON(rc.InitOK, rc.MountMounted)),
		called(4, stateJSON(rc.InitOK, rc.MountMounted)),
		called(4, "{not json"),
		called(99, stateJSON(rc.InitOK, rc.MountMounted)),
		&cdpruntime.EventBindingCalled{Name: "somethingElse", ExecutionContextID: 2, Payload: "{not json"},
	} {
		c.handle(ev)
	}
	v := c.look("L1")
	if v.state == nil || v.state.Mount != rc.MountPending || v.seq != 1 || v.broken != "" {
		t.Fatalf("trusted state = %+v", v)
	}
	if c.ignoredCalls() != 5 {
		t.Fatalf("ignored = %d, want 5 (about:blank, isolated world, iframe twice, unknown context)", c.ignoredCalls())
	}
	c.handle(called(2, stateJSON(rc.InitOK, rc.MountMounted)))
	if v := c.look("L1"); v.state.Mount != rc.MountMounted || v.seq != 2 {
		t.Fatalf("latest trusted state = %+v", v)
	}
	// A destroyed world is not trusted any more.
	c.handle(&cdpruntime.EventExecutionContextDestroyed{ExecutionContextID: 2})
	c.handle(called(2, stateJSON(rc.InitFailed, rc.MountPending)))
	if v := c.look("L1"); v.state.Mount != rc.MountMounted {
		t.Fatalf("a destroyed context changed the state: %+v", v)
	}

	// The top frame commits another document: the first one is left, and
	// nothing the new one says counts for it.
	c.handle(&cdpruntime.EventExecutionContextsCleared{})
	c.handle(navigated(top, "", "L2"))
	c.handle(created(5, top, true))
	c.handle(called(5, stateJSON(rc.InitOK, rc.MountMounted)))
	if v := c.look("L1"); !v.away || v.state.Mount != rc.MountMounted || v.seq != 2 {
		t.Fatalf("after navigating away: %+v", v)
	}
	if v := c.look("L2"); v.away || v.seq != 1 {
		t.Fatalf("the new document: %+v", v)
	}
}

func TestChannelBrokenTrustedPayloadIsAContractMismatch(t *testing.T) {
	for name, payload := range map[string]string{
		"not JSON":       "{not json",
		"not an object":  "42",
		"wrong protocol": `{"protocol":"render-ready.v0","init":"ok","mount":"mounted"}`,
		"unknown state":  `{"protocol":"render-ready.v1","init":"maybe","mount":"mounted"}`,
		"too large":      `{"protocol":"render-ready.v1","pad":"` + string(make([]byte, rc.MaxReadyStateBytes)) + `"}`,
	} {
		t.Run(name, func(t *testing.T) {
			c := newChannel()
			c.setTopFrame("TOP")
			c.handle(navigated("TOP", "", "L1"))
			c.handle(created(2, "TOP", true))
			c.handle(called(2, payload))
			// A later valid state does not repair a broken host.
			c.handle(called(2, stateJSON(rc.InitOK, rc.MountMounted)))
			v := c.look("L1")
			if v.broken == "" || v.state != nil {
				t.Fatalf("view = %+v", v)
			}
			if e := channelFault(v); e == nil || e.Code != rc.CodeContractMismatch {
				t.Fatalf("fault = %+v", e)
			}
		})
	}
}
