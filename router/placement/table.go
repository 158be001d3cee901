package placement

import (
	"hash/maphash"
	"math/bits"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"slidecells/shared/ids"
	"slidecells/shared/stalecache"
)

// table is the Cache's store of placements: a hash table of fixed-size records in memory the
// Go heap does not own, so that 100,000 placements cost the router ~7 MiB of resident memory
// and nothing at all to the garbage collector (no pointers to scan, and no share of the heap
// the collector's pacing multiplies by GOGC). A string-keyed LRU held the same placements in
// ~180 bytes each on the heap, which with the router's GOGC=400 meant ~160 MiB of RSS.
//
// A workspace ID is kept as its 128 bits (ids.Bytes) and the cell as an index into a small
// list of the cells met so far. A key that is not a canonical workspace ID (no such workspace
// is ever made) is not kept: the Cache then asks the Source each time, and remembers its "not
// found" in the negative cache as before.
//
// The table has tableShards parts, each under its own mutex: open addressing with linear
// probing, deletion by backward shift (no tombstones), and generalised CLOCK eviction: each
// record counts its uses up to maxUses, the hand takes one off each record it passes and evicts
// the first it finds at zero. A record used at least once per turn of the hand stays; one used
// often in the past survives a few turns without use; one never used after it was added goes
// at the hand's second visit. An approximation of LRU that also resists a scan of new keys. Each part holds at least
// stalecache.ShardCapacity(size) records, so any size workspaces fit.
type table struct {
	seed  maphash.Seed
	cells cellList
	parts [tableShards]tablePart
	mem   []byte // the mapping behind every part's slots; nil when they are on the heap
}

const (
	tableShards = 16
	// loadNum/loadDen is the most a part's slot array is filled: short probes (about 2.2
	// slots on average for a hit at 70 %).
	loadNum, loadDen = 7, 10
)

// slot is one record; cell == 0 marks an empty slot. 48 bytes, no pointers.
type slot struct {
	key        [16]byte
	epoch      int64
	fetched    int64
	freshUntil int64
	cell       uint16 // index into table.cells, plus one
	flags      uint8
	_          uint8
	hash       uint32 // the key's hash: its home slot, without hashing again on a shift
}

const (
	flagStale = 1 // the entry is stale (stalecache.Entry.Stale)
	// Bits 1 and 2 count uses for the hand (usesShift, maxUses).
	usesShift = 1
	usesMask  = 3 << usesShift
	maxUses   = 3
)

func uses(s *slot) uint8 { return (s.flags & usesMask) >> usesShift }

func setUses(s *slot, n uint8) { s.flags = s.flags&^usesMask | n<<usesShift }

type tablePart struct {
	mu    sync.Mutex
	slots []slot
	n     int // records held
	limit int // records held at most
	hand  int // the CLOCK hand
	_     [64]byte
}

func newTable(size int) *table {
	t := &table{seed: maphash.MakeSeed()}
	limit := stalecache.ShardCapacity(size, tableShards)
	per := (limit*loadDen + loadNum - 1) / loadNum
	total := per * tableShards * int(unsafe.Sizeof(slot{}))
	// Anonymous private memory: zero-filled, resident only where written, never scanned.
	mem, err := syscall.Mmap(-1, 0, total, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	var all []slot
	if err == nil {
		t.mem = mem
		all = unsafe.Slice((*slot)(unsafe.Pointer(unsafe.SliceData(mem))), per*tableShards)
		runtime.AddCleanup(t, func(m []byte) { _ = syscall.Munmap(m) }, mem)
	} else {
		all = make([]slot, per*tableShards) // still pointer-free; only the pacing sees it
	}
	for i := range t.parts {
		p := &t.parts[i]
		p.slots = all[i*per : (i+1)*per : (i+1)*per]
		p.limit = limit
	}
	return t
}

// locate hashes a key: its part and the slot it belongs at in that part.
func (t *table) locate(k [16]byte) (*tablePart, uint32) {
	h := maphash.Bytes(t.seed, k[:])
	return &t.parts[h>>60], uint32(h)
}

// home is the slot a hash belongs at in a part of n slots.
func home(h uint32, n int) int {
	hi, _ := bits.Mul64(uint64(h)<<32, uint64(n))
	return int(hi)
}

// find returns the index of k's slot, or -1.
func (p *tablePart) find(k [16]byte, h uint32) int {
	n := len(p.slots)
	for i := home(h, n); ; i++ {
		if i == n {
			i = 0
		}
		s := &p.slots[i]
		if s.cell == 0 {
			return -1
		}
		if s.hash == h && s.key == k {
			return i
		}
	}
}

// remove empties slot i and moves back the records after it that would no longer be found.
func (p *tablePart) remove(i int) {
	n := len(p.slots)
	for j := i; ; {
		j++
		if j == n {
			j = 0
		}
		s := &p.slots[j]
		if s.cell == 0 {
			break
		}
		// s stays where it is when its home lies cyclically in (i, j]: it is still reachable
		// from there without passing the slot being emptied.
		h := home(s.hash, n)
		if (i < j && i < h && h <= j) || (j < i && (i < h || h <= j)) {
			continue
		}
		p.slots[i] = *s
		i = j
	}
	p.slots[i] = slot{}
	p.n--
}

// evict removes one record: the first one the hand meets with no use left; every record it
// passes on the way loses one. maxUses+1 turns at most.
func (p *tablePart) evict() {
	n := len(p.slots)
	for range (maxUses+1)*n + 1 {
		i := p.hand
		p.hand++
		if p.hand == n {
			p.hand = 0
		}
		s := &p.slots[i]
		if s.cell == 0 {
			continue
		}
		if u := uses(s); u > 0 {
			setUses(s, u-1)
			continue
		}
		p.remove(i)
		return
	}
}

func (t *table) read(key string, use bool) (stalecache.Entry[Placement], bool) {
	k, ok := ids.Bytes(ids.Workspace, key)
	if !ok {
		return stalecache.Entry[Placement]{}, false
	}
	p, h := t.locate(k)
	p.mu.Lock()
	i := p.find(k, h)
	if i < 0 {
		p.mu.Unlock()
		return stalecache.Entry[Placement]{}, false
	}
	s := &p.slots[i]
	if use {
		if u := uses(s); u < maxUses {
			setUses(s, u+1)
		}
	}
	e := stalecache.Entry[Placement]{
		V:       Placement{CellID: t.cells.name(s.cell), Epoch: s.epoch},
		Fetched: s.fetched, FreshUntil: s.freshUntil, Stale: s.flags&flagStale != 0,
	}
	p.mu.Unlock()
	return e, true
}

// Get implements stalecache.Store.
func (t *table) Get(key string) (stalecache.Entry[Placement], bool) { return t.read(key, true) }

// Peek implements stalecache.Store.
func (t *table) Peek(key string) (stalecache.Entry[Placement], bool) { return t.read(key, false) }

// Add implements stalecache.Store. A new record starts with one use (the request that loaded
// it), so the hand spares it once; a replaced record keeps its uses.
func (t *table) Add(key string, e stalecache.Entry[Placement]) {
	k, ok := ids.Bytes(ids.Workspace, key)
	if !ok {
		return
	}
	cell, ok := t.cells.index(e.V.CellID)
	if !ok {
		return
	}
	rec := slot{key: k, epoch: e.V.Epoch, fetched: e.Fetched, freshUntil: e.FreshUntil, cell: cell}
	if e.Stale {
		rec.flags |= flagStale
	}
	setUses(&rec, 1)
	p, h := t.locate(k)
	rec.hash = h
	p.mu.Lock()
	defer p.mu.Unlock()
	if i := p.find(k, h); i >= 0 {
		setUses(&rec, uses(&p.slots[i]))
		p.slots[i] = rec
		return
	}
	if p.n >= p.limit {
		p.evict()
	}
	n := len(p.slots)
	i := home(h, n)
	for p.slots[i].cell != 0 {
		if i++; i == n {
			i = 0
		}
	}
	p.slots[i] = rec
	p.n++
}

// Remove implements stalecache.Store.
func (t *table) Remove(key string) {
	k, ok := ids.Bytes(ids.Workspace, key)
	if !ok {
		return
	}
	p, h := t.locate(k)
	p.mu.Lock()
	defer p.mu.Unlock()
	if i := p.find(k, h); i >= 0 {
		p.remove(i)
	}
}

// Len implements stalecache.Store.
func (t *table) Len() int {
	n := 0
	for i := range t.parts {
		p := &t.parts[i]
		p.mu.Lock()
		n += p.n
		p.mu.Unlock()
	}
	return n
}

// cellList numbers the cells placements name: a deployment has a handful, so each record
// carries a 16-bit number instead of a string. It is read without a lock: a new cell replaces
// the whole (small) list.
type cellList struct {
	mu   sync.Mutex
	list atomic.Pointer[cellNames]
}

type cellNames struct {
	names []string
	index map[string]uint16
}

// maxCells is how many cells the list numbers; placements on cells past it are not cached.
const maxCells = 1<<16 - 1

func (l *cellList) name(i uint16) string { return l.list.Load().names[i-1] }

func (l *cellList) index(cell string) (uint16, bool) {
	if c := l.list.Load(); c != nil {
		if i, ok := c.index[cell]; ok {
			return i, true
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	old := l.list.Load()
	if old == nil {
		old = &cellNames{}
	}
	if i, ok := old.index[cell]; ok {
		return i, true
	}
	if len(old.names) >= maxCells {
		return 0, false
	}
	c := &cellNames{names: append(old.names[:len(old.names):len(old.names)], cell), index: make(map[string]uint16, len(old.names)+1)}
	for i, name := range c.names {
		c.index[name] = uint16(i + 1)
	}
	l.list.Store(c)
	return uint16(len(c.names)), true
}
