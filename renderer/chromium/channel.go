package chromium

import (
	"encoding/json"
	"sync"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	cdpruntime "github.com/chromedp/cdproto/runtime"

	rc "slidecells/shared/rendercontract"
)

// channel is the renderer's end of the readiness channel (rendercontract
// doc, "Readiness protocol render-ready.v1"). It is fed browser events in the
// order the browser sent them (chromedp calls listeners on one goroutine, in
// order), and read by the waiting code.
//
// Which calls it trusts: a call through the rc.ReadyBinding binding whose
// execution context is a default (main-world) context of the top frame,
// alive when the call arrived. A frame has one live main world at a time,
// the one of its current document; scripts of a document run only after its
// commit (Page.frameNavigated), so each trusted call is filed under the top
// frame's document current at that moment. The waiting code then reads only
// the state filed under the document it navigated to, and sees when the top
// frame committed any document after it.
type channel struct {
	mu sync.Mutex
	// topFrame is the page's main frame, known before navigation.
	topFrame cdp.FrameID
	// docs are the loaders of the documents the top frame committed, in
	// order.
	docs []cdp.LoaderID
	// mainWorlds maps live default execution contexts to their frame.
	mainWorlds map[cdpruntime.ExecutionContextID]cdp.FrameID
	// states holds, per index into docs, the latest trusted state; broken
	// holds the first trusted payload that was not a valid state.
	states map[int]*rc.ReadyState
	broken map[int]string
	// seq counts trusted payloads per document, so waiters can tell a
	// new state from the one they saw.
	seq map[int]int
	// ignored counts binding calls that were not trusted.
	ignored int
	// changed is closed, and replaced, when what look returns may have
	// changed (a commit of the top frame, a trusted state or broken
	// payload): waiters wake on it instead of only at their next poll.
	changed chan struct{}
}

func newChannel() *channel {
	return &channel{
		mainWorlds: map[cdpruntime.ExecutionContextID]cdp.FrameID{},
		states:     map[int]*rc.ReadyState{},
		broken:     map[int]string{},
		seq:        map[int]int{},
		changed:    make(chan struct{}),
	}
}

// notify wakes the waiters of the current views; c.mu is held.
func (c *channel) notify() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// setTopFrame records the main frame before navigation.
func (c *channel) setTopFrame(id cdp.FrameID) {
	c.mu.Lock()
	c.topFrame = id
	c.mu.Unlock()
}

// handle takes one browser event; it never blocks on the browser.
func (c *channel) handle(ev any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch ev := ev.(type) {
	case *page.EventFrameNavigated:
		if ev.Frame != nil && ev.Frame.ParentID == "" {
			c.docs = append(c.docs, ev.Frame.LoaderID)
			c.notify()
		}
	case *cdpruntime.EventExecutionContextCreated:
		if ev.Context == nil {
			return
		}
		var aux struct {
			IsDefault bool        `json:"isDefault"`
			FrameID   cdp.FrameID `json:"frameId"`
		}
		if len(ev.Context.AuxData) > 0 && json.Unmarshal(ev.Context.AuxData, &aux) == nil && aux.IsDefault && aux.FrameID != "" {
			c.mainWorlds[ev.Context.ID] = aux.FrameID
		}
	case *cdpruntime.EventExecutionContextDestroyed:
		delete(c.mainWorlds, ev.ExecutionContextID)
	case *cdpruntime.EventExecutionContextsCleared:
		clear(c.mainWorlds)
	case *cdpruntime.EventBindingCalled:
		if ev.Name != rc.ReadyBinding {
			return
		}
		frame, live := c.mainWorlds[ev.ExecutionContextID]
		if !live || c.topFrame == "" || frame != c.topFrame || len(c.docs) == 0 {
			c.ignored++
			return
		}
		doc := len(c.docs) - 1
		if _, bad := c.broken[doc]; bad {
			return
		}
		st, msg := parseState(ev.Payload)
		if st == nil {
			c.broken[doc] = msg
			c.notify()
			return
		}
		c.states[doc] = st
		c.seq[doc]++
		c.notify()
	}
}

// parseState decodes one trusted payload; a nil state comes with a message
// that is safe to show.
func parseState(payload string) (*rc.ReadyState, string) {
	if len(payload) > rc.MaxReadyStateBytes {
		return nil, rc.ReadinessProtocol + " state above the channel's size limit"
	}
	var st rc.ReadyState
	if err := json.Unmarshal([]byte(payload), &st); err != nil {
		return nil, rc.ReadinessProtocol + " state is not a JSON object of the protocol's shape"
	}
	if msg, ok := st.CheckShape(); !ok {
		return nil, msg
	}
	return &st, ""
}

// view is what the waiting code sees of the document it navigated to.
type view struct {
	// committed: the top frame committed the document.
	committed bool
	// away: the top frame committed another document after it.
	away bool
	// state is the latest trusted state (nil before the first); seq
	// counts trusted states so far.
	state *rc.ReadyState
	seq   int
	// broken is set when a trusted payload was not a valid state.
	broken string
	// changed is closed at the channel's first change after this view
	// was taken.
	changed <-chan struct{}
}

// look returns the view of the document loaded by loader.
func (c *channel) look(loader cdp.LoaderID) view {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, l := range c.docs {
		if l == loader {
			return view{committed: true, away: i < len(c.docs)-1, state: c.states[i], seq: c.seq[i], broken: c.broken[i], changed: c.changed}
		}
	}
	return view{changed: c.changed}
}

// ignoredCalls is the number of binding calls that were not trusted.
func (c *channel) ignoredCalls() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ignored
}
