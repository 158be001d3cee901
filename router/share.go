package router

import (
	"hash/maphash"
	"sync"
)

// workspaceShare counts each workspace's requests in flight from this router to its cell, so
// that one workspace cannot take its cell's whole in-flight bound (MaxInFlightPerCell) and
// leave the cell's other tenants with 503 CELL_OVERLOADED. Entries exist only while a request
// of the workspace is in flight, so memory follows the requests, not the workspaces ever seen.
// Shards keep the lock of one busy workspace off the others' paths.
type workspaceShare struct {
	seed   maphash.Seed
	shards [64]shareShard
}

type shareShard struct {
	mu sync.Mutex
	n  map[string]int
	_  [64 - 16]byte // one shard per cache line
}

func newWorkspaceShare() *workspaceShare {
	s := &workspaceShare{seed: maphash.MakeSeed()}
	for i := range s.shards {
		s.shards[i].n = make(map[string]int)
	}
	return s
}

func (s *workspaceShare) shard(ws string) *shareShard {
	return &s.shards[maphash.String(s.seed, ws)%uint64(len(s.shards))]
}

// acquire counts one more request of ws in flight, unless max already are; it reports
// whether it did. Each true is matched by one release.
func (s *workspaceShare) acquire(ws string, max int) bool {
	sh := s.shard(ws)
	sh.mu.Lock()
	n := sh.n[ws]
	ok := n < max
	if ok {
		sh.n[ws] = n + 1
	}
	sh.mu.Unlock()
	return ok
}

// release counts one request of ws fewer.
func (s *workspaceShare) release(ws string) {
	sh := s.shard(ws)
	sh.mu.Lock()
	if n := sh.n[ws] - 1; n > 0 {
		sh.n[ws] = n
	} else {
		delete(sh.n, ws)
	}
	sh.mu.Unlock()
}
