package h1

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkEvictScan measures one choice of a connection to close at MaxConns among 4,096 (no
// close: the choice is undone), with every connection idle (the usual case at the cap) and with
// every one busy (nothing to close: the worst case, a full scan).
func BenchmarkEvictScan(b *testing.B) {
	for _, st := range []int32{stateIdle, stateActive} {
		name := map[int32]string{stateIdle: "idle", stateActive: "busy"}[st]
		b.Run(fmt.Sprintf("%s-4096", name), func(b *testing.B) {
			s := &Server{MaxConns: 4096}
			s.init()
			b.Cleanup(func() {
				s.mu.Lock()
				clear(s.conns) // stand-ins, with no socket to close
				s.mu.Unlock()
				_ = s.Close()
			})
			now := time.Now().UnixNano()
			s.mu.Lock()
			for i := range 4096 {
				c := &conn{s: s}
				c.since.Store(now - int64(i))
				c.state.Store(st)
				s.conns[c] = struct{}{}
			}
			s.mu.Unlock()
			b.ResetTimer()
			for b.Loop() {
				s.mu.Lock()
				s.pickVictimLocked(now)
				s.mu.Unlock()
			}
		})
	}
}
