package supervisor

import (
	"fmt"
	"sync"
)

// StandbyCPU keeps a group prepared ahead of its attempt (a standby) at the
// lowest CPU weight and under a small cap, so that preparing it — mostly a
// browser launch — does not take CPU from an attempt that runs meanwhile on
// the same host. Admit gives it the attempt's CPU (Spec.CgroupLimits.CPUs at
// the default weight) when an attempt takes it.
//
// Admit may come at any moment: before Start creates the group's cgroup
// (the cgroup is then created with the attempt's CPU), while Start runs
// (the cgroup is raised as soon as it exists), or after. A StandbyCPU
// belongs to one Spec and is used by one Start.
type StandbyCPU struct {
	// CPUs caps the group while it is a standby, in cores.
	CPUs float64

	mu       sync.Mutex
	admitted bool
	// cg is the group's cgroup once created at the standby's CPU, cpus
	// the attempt's cap it is raised to.
	cg   *Cgroup
	cpus float64
	// afterCreate, when set (tests), runs between the cgroup's creation
	// and its hand-over to Admit.
	afterCreate func()
}

// Admit gives the group the attempt's CPU; later calls do nothing. An error
// means the cgroup could not be raised (it was removed, or the kernel
// refused): the group still runs under the standby's CPU.
func (s *StandbyCPU) Admit() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.admitted {
		return nil
	}
	s.admitted = true
	if s.cg == nil {
		// Not created yet: create sees admitted.
		return nil
	}
	return s.raiseLocked()
}

func (s *StandbyCPU) raiseLocked() error {
	if err := s.cg.raiseCPU(s.cpus); err != nil {
		return fmt.Errorf("supervisor: raise the standby to the attempt's CPU: %w", err)
	}
	return nil
}

// create makes a group's cgroup for Start: at the standby's CPU unless
// Admit came first. Admit's lock is not held while the cgroup is created
// (an attempt's admission does not wait for it); an Admit that comes in
// between is applied before create returns.
func (s *StandbyCPU) create(c *Cgroups, name string, l CgroupLimits) (*Cgroup, error) {
	l = l.WithDefaults()
	s.mu.Lock()
	standby := !s.admitted
	s.mu.Unlock()
	if !standby {
		return c.create(name, l, 0)
	}
	cg, err := c.create(name, l, s.CPUs)
	if err != nil {
		return nil, err
	}
	if s.afterCreate != nil {
		s.afterCreate()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cg, s.cpus = cg, l.CPUs
	if s.admitted {
		if err := s.raiseLocked(); err != nil {
			_ = cg.Remove()
			return nil, err
		}
	}
	return cg, nil
}
