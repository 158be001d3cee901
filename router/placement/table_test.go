package placement

import (
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync"
	"testing"

	"slidecells/shared/ids"
	"slidecells/shared/stalecache"
)

func newIDs(n int) []string {
	ws := make([]string, n)
	for i := range ws {
		ws[i] = ids.New(ids.Workspace)
	}
	return ws
}

func entryFor(i int) stalecache.Entry[Placement] {
	return stalecache.Entry[Placement]{
		V:       Placement{CellID: "cell-" + strconv.Itoa(i%5), Epoch: int64(i)},
		Fetched: int64(i) * 1000, FreshUntil: int64(i)*1000 + 30, Stale: i%3 == 0,
	}
}

// TestTableAgainstAMap runs random operations on a table with small parts (so probes wrap
// around and removals shift records back) and on a map, and compares every answer.
func TestTableAgainstAMap(t *testing.T) {
	t.Parallel()
	tb := newTable(64) // parts of at most 15 records in 22 slots
	ws := newIDs(48)   // fewer than Size: nothing may be evicted
	model := map[string]stalecache.Entry[Placement]{}
	r := rand.New(rand.NewPCG(1, 2))
	for step := range 20_000 {
		w := ws[r.IntN(len(ws))]
		switch op := r.IntN(4); op {
		case 0, 1:
			e := entryFor(step)
			tb.Add(w, e)
			model[w] = e
		case 2:
			tb.Remove(w)
			delete(model, w)
		case 3:
			get := tb.Get
			if r.IntN(2) == 0 {
				get = tb.Peek
			}
			got, ok := get(w)
			want, wok := model[w]
			if ok != wok || got != want {
				t.Fatalf("step %d: %s = %+v %v, want %+v %v", step, w, got, ok, want, wok)
			}
		}
		if tb.Len() != len(model) {
			t.Fatalf("step %d: Len %d, want %d", step, tb.Len(), len(model))
		}
	}
	for _, w := range ws {
		got, ok := tb.Peek(w)
		if want, wok := model[w]; ok != wok || got != want {
			t.Fatalf("end: %s = %+v %v, want %+v %v", w, got, ok, want, wok)
		}
	}
}

// TestTableSizeKeysFit: a table of Size holds any Size workspaces (its parts fill unevenly).
func TestTableSizeKeysFit(t *testing.T) {
	t.Parallel()
	const n = 100_000
	tb := newTable(n)
	ws := newIDs(n)
	for i, w := range ws {
		tb.Add(w, entryFor(i))
	}
	if tb.Len() != n {
		t.Fatalf("%d of %d placements kept", tb.Len(), n)
	}
	for i, w := range ws {
		if got, ok := tb.Get(w); !ok || got != entryFor(i) {
			t.Fatalf("%d: %+v %v", i, got, ok)
		}
	}
}

// TestTableEvictsTheUnused: past its size the table drops records, sparing those in use.
func TestTableEvictsTheUnused(t *testing.T) {
	t.Parallel()
	const size = 1000
	tb := newTable(size)
	old, hot, fresh := newIDs(size), newIDs(50), newIDs(3*size)
	for i, w := range append(hot, old...) {
		tb.Add(w, entryFor(i))
	}
	for i, w := range fresh {
		if i%20 == 0 {
			for _, h := range hot {
				if _, ok := tb.Get(h); !ok {
					t.Fatalf("a placement in use was evicted after %d new ones", i)
				}
			}
		}
		tb.Add(w, entryFor(i))
	}
	limit := stalecache.ShardCapacity(size, tableShards) * tableShards
	if n := tb.Len(); n < size || n > limit {
		t.Errorf("Len %d, want between %d and %d", n, size, limit)
	}
	kept := 0
	for _, w := range old {
		if _, ok := tb.Peek(w); ok {
			kept++
		}
	}
	if kept > size/10 {
		t.Errorf("%d of %d unused old placements kept after %d new ones", kept, size, len(fresh))
	}
	for i, w := range fresh[len(fresh)-size/2:] {
		if got, ok := tb.Peek(w); !ok || got != entryFor(len(fresh)-size/2+i) {
			t.Fatalf("a placement just added is missing or wrong: %+v %v", got, ok)
		}
	}
}

// TestTableKeepsCanonicalWorkspaceIDsOnly: other keys are declined (the Cache then asks the
// Source each time), never folded onto a workspace that exists.
func TestTableKeepsCanonicalWorkspaceIDsOnly(t *testing.T) {
	t.Parallel()
	tb := newTable(100)
	w := ids.New(ids.Workspace)
	tb.Add(w, entryFor(1))
	// Same first 128 bits, other trailing bits: a valid ID naming no workspace.
	alias := w[:len(w)-1] + string(w[len(w)-1]+1)
	if !ids.Valid(ids.Workspace, alias) {
		alias = w[:len(w)-1] + string(w[len(w)-1]-1)
	}
	for _, k := range []string{alias, "ws1", "", ids.New(ids.Project)} {
		tb.Add(k, entryFor(2))
		if e, ok := tb.Get(k); ok {
			t.Errorf("%q kept: %+v", k, e)
		}
		tb.Remove(k)
	}
	if got, ok := tb.Get(w); !ok || got != entryFor(1) || tb.Len() != 1 {
		t.Errorf("the workspace's own placement: %+v %v (Len %d)", got, ok, tb.Len())
	}
}

func TestTableConcurrentUse(t *testing.T) {
	t.Parallel()
	tb := newTable(2000)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			ws := newIDs(200)
			for round := range 20 {
				for i, w := range ws {
					tb.Add(w, entryFor(g*1000+round+i))
				}
				for i, w := range ws {
					if got, ok := tb.Get(w); !ok || got != entryFor(g*1000+round+i) {
						t.Errorf("goroutine %d: %+v %v", g, got, ok)
						return
					}
				}
				for _, w := range ws[:100] {
					tb.Remove(w)
				}
			}
		})
	}
	wg.Wait()
	if n := tb.Len(); n != 8*100 {
		t.Errorf("Len %d, want %d", n, 800)
	}
}

// TestTableIsOffTheHeap: 100,000 placements add next to nothing to the Go heap (what the
// router's GOGC multiplies) — the point of the table.
func TestTableIsOffTheHeap(t *testing.T) {
	const n = 100_000
	ws := newIDs(n)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	tb := newTable(n)
	for i, w := range ws {
		tb.Add(w, entryFor(i))
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew > 1<<20 {
		t.Errorf("the heap grew by %d bytes for %d placements", grew, n)
	}
	if tb.Len() != n || tb.mem == nil {
		t.Fatalf("Len %d, mapped %v", tb.Len(), tb.mem != nil)
	}
	runtime.KeepAlive(tb)
}
