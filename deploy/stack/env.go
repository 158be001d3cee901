package stack

import "strings"

// Unsetenv removes a variable from the environment the process gets at its next Start (a fault
// test restarts a cell without its failpoints).
func (p *Proc) Unsetenv(name string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	kept := p.env[:0:0]
	for _, kv := range p.env {
		if !strings.HasPrefix(kv, name+"=") {
			kept = append(kept, kv)
		}
	}
	p.env = kept
}
