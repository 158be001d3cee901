package stack

import (
	"strconv"
	"strings"

	"slidecells/shared/pgserver"
)

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

// Pid is the process's ID, 0 when it was never started (benchmarks read its /proc entries or
// put it into a cgroup).
func (p *Proc) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.proc == nil {
		return 0
	}
	return p.proc.Pid()
}

// Env returns a copy of the extra environment the process starts with (its settings).
func (p *Proc) Env() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.env...)
}

// StartReplica starts one more process of a running cell: the same settings and database, its
// own listen address, without the cell's failpoints, plus env. The router does not send it
// requests (the directory names the first process); it runs the cell's workers, which is what
// tests of several replicas need. Stop stops it with the rest.
func (s *Stack) StartReplica(cell string, env ...string) (*Proc, error) {
	base := s.Cells[cell]
	port, err := pgserver.FreePort()
	if err != nil {
		return nil, err
	}
	var kept []string
	for _, kv := range base.Env() {
		if !strings.HasPrefix(kv, "CELL_LISTEN_ADDR=") && !strings.HasPrefix(kv, "CELL_FAILPOINTS=") {
			kept = append(kept, kv)
		}
	}
	name := cell + "-replica-" + strconv.Itoa(len(s.Replicas)+1)
	url := "http://127.0.0.1:" + strconv.Itoa(port)
	p := &Proc{Name: name, URL: url, bin: base.bin, log: strings.TrimSuffix(base.log, cell+".log") + name + ".log",
		env: append(append(kept, "CELL_LISTEN_ADDR=127.0.0.1:"+strconv.Itoa(port)), env...)}
	if err := p.Start(); err != nil {
		return nil, err
	}
	s.Replicas = append(s.Replicas, p)
	return p, nil
}
