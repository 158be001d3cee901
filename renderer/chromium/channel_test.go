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

// closed reports whether ch is closed, without waiting.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// TestChannelWakesWaiters: a view's changed channel closes when the top
// frame commits and when a trusted state or broken payload arrives, not for
// what the channel ignores; a waiter on it starts its next read early.
func TestChannelWakesWaiters(t *testing.T) {
	c := newChannel()
	c.setTopFrame("TOP")
	v := c.look("L1")
	c.handle(created(1, "TOP", true)) // about:blank's world
	c.handle(called(1, stateJSON(rc.InitOK, rc.MountMounted)))
	if closed(v.changed) {
		t.Fatal("woken before the document committed")
	}
	c.handle(navigated("TOP", "", "L1"))
	if !closed(v.changed) {
		t.Fatal("the commit did not wake the waiter")
	}
	v = c.look("L1")
	c.handle(created(2, "TOP", true))
	c.handle(created(3, "TOP", false))
	c.handle(navigated("CHILD", "TOP", "L9"))
	c.handle(called(3, stateJSON(rc.InitOK, rc.MountMounted))) // isolated world: ignored
	if closed(v.changed) {
		t.Fatal("woken by events that change nothing the waiter sees")
	}
	c.handle(called(2, stateJSON(rc.InitOK, rc.MountPending)))
	if !closed(v.changed) {
		t.Fatal("a trusted state did not wake the waiter")
	}
	p := newPacer()
	p.wait(v.changed)
	if !p.woken || p.wakes != 1 {
		t.Fatalf("pacer after a state: woken %v, wakes %d", p.woken, p.wakes)
	}
	next := c.look("L1")
	if next.seq != 1 || closed(next.changed) {
		t.Fatalf("view after the state: %+v", next)
	}
	c.handle(called(2, "{not json"))
	if !closed(next.changed) || c.look("L1").broken == "" {
		t.Fatal("a broken payload did not wake the waiter")
	}
}

// TestWakesDoNotExhaustMissingPolls: reads started early by the channel do
// not count towards missingPolls; reads after a full poll interval do, the
// first read included.
func TestWakesDoNotExhaustMissingPolls(t *testing.T) {
	p := newPacer()
	if p.noState() {
		t.Fatal("missing after the first read")
	}
	woke := make(chan struct{})
	close(woke)
	for range 10 * missingPolls {
		p.wait(woke)
		if p.noState() {
			t.Fatalf("missing after %d reads started by the channel", p.wakes)
		}
	}
	never := make(chan struct{})
	for i := 2; i <= missingPolls; i++ {
		p.wait(never)
		if got := p.noState(); got != (i == missingPolls) {
			t.Fatalf("read %d after full poll intervals: missing %v", i, got)
		}
	}
}
