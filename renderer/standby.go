package renderer

import (
	"encoding/json"
	"errors"
	"io"
	"time"

	"go.uber.org/zap"

	"slidecells/renderer/chromium"
	"slidecells/renderer/egress"
	"slidecells/renderer/supervisor"
	"slidecells/shared/logging"
	rc "slidecells/shared/rendercontract"
)

// The slot's process groups. While the slot is idle, the renderer prepares
// the next attempt's whole environment ahead of it: a slot child with its
// namespaces, cgroup and limits, leased user, private temp directory, egress
// proxy, and a Chromium launched with the release profile's launch flags
// and connected over DevTools, stopped where a document would be opened
// (the standby). An admitted attempt takes it; only then does the child
// learn the job (ticket-bound deadlines, preview access, the document).
// After the attempt's cleanup the next standby is prepared. A standby is
// used once or discarded: it is never shared, never returned to, and a
// standby nobody took is stopped and proven gone like an attempt.
//
// A standby is prepared while an attempt of another slot or renderer may
// run on the same cores, and its browser launch would take CPU from it: it
// is prepared at the lowest CPU weight and under a small cap
// (RENDER_STANDBY_CPUS), and raised to the attempt's CPU settings the
// moment an attempt takes it, also while it is still starting.
//
// There is one process group per slot at a time: the standby, the attempt
// that took it, or one being released. An attempt admitted while no
// standby exists (no standby configured in tests, or one that failed)
// starts its own child at once: a cold start, through the same child
// protocol.

// childState is where a slot child is.
type childState int

const (
	childStarting  childState = iota // supervisor.Start runs
	childPreparing                   // the child starts its browser
	childReady                       // browser started and checked; waits for an attempt
	childBound                       // an attempt took it
	childEnding                      // discarded or gone; never handed out
)

// slotChild is one process group of the slot. Fields are guarded by the
// server's mutex, except g, proxy and startErr, which are set once before
// started is closed.
type slotChild struct {
	state   childState
	created time.Time
	readyAt time.Time
	started chan struct{}
	g       *supervisor.Group
	proxy   *egress.Proxy
	// cpu holds a standby at its small CPU until an attempt takes it
	// (nil for a cold start, or with RENDER_STANDBY_CPUS=0).
	cpu *supervisor.StandbyCPU
	// startErr is why supervisor.Start failed.
	startErr error
	// attempt is the attempt that took the child, log its logger.
	attempt *attempt
	log     *zap.Logger
	// discard is why the control process discarded the child unused
	// (a replacement reason, or "" for a shutdown or an attempt that
	// ended before taking it); failed is the child's own report.
	discard   string
	discarded bool
	failed    string
}

// standbyInput is a slot child's first message: the launch parameters of
// the attempt's browser, the same for every attempt, and nothing of any
// request.
func (s *Server) standbyInput() []byte {
	job := chromium.Job{
		Standby:       true,
		Browser:       chromium.BrowserSettings{Path: s.cfg.BrowserPath, Locale: chromium.Locale, Timezone: chromium.Timezone},
		Document:      chromium.DocumentSettings{AllowedOrigins: s.origins},
		BrowserLog:    s.cfg.BrowserLog,
		EgressProxy:   egress.Addr,
		NoBrowserGate: s.cfg.noBrowserGate,
		StandbyCheck:  s.cfg.standbyCheck,
	}
	b, _ := json.Marshal(job)
	return b
}

// newChildLocked starts a slot child: the standby (a == nil) or an
// attempt's own (cold).
func (s *Server) newChildLocked(a *attempt) *slotChild {
	c := &slotChild{created: time.Now(), started: make(chan struct{})}
	if a != nil {
		c.state, c.attempt = childBound, a
	} else if s.cfg.StandbyCPUs > 0 {
		c.cpu = &supervisor.StandbyCPU{CPUs: s.cfg.StandbyCPUs}
	}
	if s.live == 0 {
		s.liveZero = make(chan struct{})
	}
	s.live++
	go s.runChild(c)
	return c
}

// runChild starts a slot child, reads its events until it is gone and then
// ends its attempt, or accounts for the standby nobody took.
func (s *Server) runChild(c *slotChild) {
	log := s.log.With(zap.String("attempt_id", "standby"))
	var proxy *egress.Proxy
	// Until an attempt takes it, the standby's own deadline bounds it,
	// two minutes past its age limit in case recycling did not happen.
	spec := s.childSpec(s.standbyInput(), time.Now().Add(s.cfg.StandbyMaxAge+2*time.Minute), log, &proxy)
	spec.HoldInput = true
	spec.Standby = c.cpu
	g, err := s.startChild(spec)
	s.mu.Lock()
	c.g, c.proxy, c.startErr = g, proxy, err
	close(c.started)
	if err != nil {
		if c.attempt == nil {
			s.standbyEndedLocked(c, supervisor.Outcome{}, log)
		}
		// A bound attempt's runner reports the failed start.
		s.childGoneLocked(c)
		s.mu.Unlock()
		return
	}
	if c.state == childStarting {
		c.state = childPreparing
	}
	if c.state == childEnding || (c.attempt == nil && s.draining) {
		g.Stop(supervisor.StopDiscard)
	}
	s.mu.Unlock()
	s.metrics.isolation(g.Outcome().Isolation)

	ev := &childEvents{artifacts: map[rc.ArtifactName]*storedArtifact{}}
	ev.streamErr = chromium.ReadEvents(g.Stdout(), func(e chromium.Event, body io.Reader) error {
		switch e.Type {
		case chromium.EventStandbyReady:
			s.standbyReady(c, log)
			return nil
		case chromium.EventStandbyFailed:
			s.mu.Lock()
			c.failed = tail(e.Message, 200)
			s.mu.Unlock()
			return nil
		}
		s.mu.Lock()
		a := c.attempt
		s.mu.Unlock()
		if a == nil {
			return errors.New("attempt event from a child no attempt took")
		}
		return s.attemptEvent(a, ev, e, body)
	})
	if ev.streamErr != nil {
		// The stream can no longer be trusted: stop the child and
		// drain what it still writes so it cannot block.
		s.mu.Lock()
		l := log
		if c.attempt != nil {
			l = c.log
			c.attempt.requestStopLocked(supervisor.StopSupervise)
		} else {
			g.Stop(supervisor.StopSupervise)
		}
		s.mu.Unlock()
		l.Error("execution child broke the event protocol", zap.Error(ev.streamErr))
		_, _ = io.Copy(io.Discard, g.Stdout())
	}
	<-g.Done()
	out := g.Outcome()
	ev.egress = proxy
	s.metrics.limits(out, proxy)
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.attempt != nil {
		s.finishLocked(c.attempt, ev, out, c.log)
	} else {
		s.standbyEndedLocked(c, out, log)
	}
	s.childGoneLocked(c)
}

// childGoneLocked accounts for a slot child whose processes are proven gone
// (or never started) and lets the next standby be prepared.
func (s *Server) childGoneLocked(c *slotChild) {
	c.state = childEnding
	if s.standby == c {
		s.standby = nil
	}
	s.live--
	if s.live == 0 {
		close(s.liveZero)
	}
	s.wakeStandby()
}

// standbyReady records a standby whose browser started and passed its
// first check: the launch probe passed, the slot has a warm standby.
func (s *Server) standbyReady(c *slotChild, log *zap.Logger) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c.readyAt = time.Now()
	if c.state != childPreparing {
		// Taken (or discarded) while it was starting.
		return
	}
	c.state = childReady
	s.metrics.stage("launch_probe", c.readyAt.Sub(c.created))
	s.metrics.standbyReady.Set(1)
	s.metrics.probes.WithLabelValues("ok").Inc()
	s.metrics.ready.Set(1)
	if s.probeState != "ok" {
		log.Info("launch probe ok", zap.Duration("took", c.readyAt.Sub(c.created)))
	}
	s.probeState = "ok"
	log.Debug("standby ready", zap.Duration("took", c.readyAt.Sub(c.created)))
	s.wakeStandby()
}

// standbyEndedLocked accounts for a standby that ended before any attempt
// took it: recycled, discarded, or failed on its own (then it is reported
// and replaced).
func (s *Server) standbyEndedLocked(c *slotChild, out supervisor.Outcome, log *zap.Logger) {
	s.metrics.standbyReady.Set(0)
	now := time.Now()
	if c.discarded {
		if c.discard != "" {
			s.metrics.standbyReplacements.WithLabelValues(c.discard).Inc()
			log.Info("standby replaced", zap.String("reason", c.discard), zap.Duration("age", now.Sub(c.created)))
		}
		if c.discard == replacedMaxAge {
			s.standbyFailures = 0
		}
		return
	}
	s.standbyFailures++
	if c.readyAt.IsZero() {
		// Never became ready: the launch probe failed. The next try
		// follows after the probe interval, as a failed probe's did.
		problem := c.failed
		switch {
		case c.startErr != nil:
			problem = "isolation: " + c.startErr.Error()
		case problem == "":
			problem = "child ended without a result: " + tail(logging.Redact(out.Stderr), 300)
		default:
			problem += ": " + tail(logging.Redact(out.Stderr), 300)
		}
		s.metrics.standbyReplacements.WithLabelValues(replacedStartFailed).Inc()
		s.metrics.probes.WithLabelValues("failed").Inc()
		s.metrics.ready.Set(0)
		if prev := s.probeState; prev != "failed: "+problem {
			log.Error("launch probe failed; not ready", zap.String("problem", problem))
		}
		s.probeState = "failed: " + problem
		s.standbyRetryAt = now.Add(s.cfg.LaunchProbeInterval)
		return
	}
	reason := replacedDied
	if c.failed == "browser stopped answering" {
		reason = replacedCheckFailed
	}
	s.metrics.standbyReplacements.WithLabelValues(reason).Inc()
	log.Warn("standby failed; replacing it", zap.String("reason", reason), zap.String("report", c.failed),
		zap.Int("exit_code", out.ExitCode), zap.Int("oom_kills", out.OOMKills), zap.String("stderr", tail(logging.Redact(out.Stderr), 300)))
	// The first replacement follows at once; one that keeps failing
	// backs off (1 s, 2 s, … up to the probe interval).
	wait := time.Duration(0)
	if s.standbyFailures > 1 {
		wait = time.Second << min(s.standbyFailures-2, 10)
		wait = min(wait, s.cfg.LaunchProbeInterval)
	}
	s.standbyRetryAt = now.Add(wait)
}

// discardLocked stops a slot child that no attempt will use; reason is the
// replacement reason counted ("" for none).
func (s *Server) discardLocked(c *slotChild, reason string) {
	if c.discarded {
		return
	}
	c.discarded, c.discard = true, reason
	c.attempt = nil
	if s.standby == c {
		s.standby = nil
		s.metrics.standbyReady.Set(0)
	}
	if c.state == childStarting {
		// runChild stops it once it started.
		c.state = childEnding
		return
	}
	c.state = childEnding
	if c.g != nil {
		c.g.Stop(supervisor.StopDiscard)
	}
}

// takeStandbyLocked gives an admitted attempt the slot's standby, if one
// is there and alive. warm says whether its browser was ready.
func (s *Server) takeStandbyLocked(a *attempt) (c *slotChild, warm bool) {
	c = s.standby
	if c == nil || c.state == childEnding || (c.g != nil && c.g.Phase() != supervisor.PhaseRunning) {
		return nil, false
	}
	if c.cpu != nil {
		// The attempt's CPU from now on, also for a standby still
		// starting: the attempt waits for its browser.
		if err := c.cpu.Admit(); err != nil {
			s.log.Error("standby not raised to the attempt's CPU; discarded, the attempt starts its own child", zap.Error(err))
			s.discardLocked(c, "")
			return nil, false
		}
	}
	warm = c.state == childReady
	c.state, c.attempt = childBound, a
	s.standby = nil
	s.metrics.standbyReady.Set(0)
	return c, warm
}

// wakeStandby asks the standby keeper to look at the slot.
func (s *Server) wakeStandby() {
	select {
	case s.standbyWake <- struct{}{}:
	default:
	}
}

// standbyKeeper prepares a standby whenever the slot is idle and has
// none, and recycles one older than StandbyMaxAge, until shutdown.
func (s *Server) standbyKeeper() {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-s.janitorStop:
			return
		case <-s.standbyWake:
		case <-t.C:
		}
		s.mu.Lock()
		next := s.tendStandbyLocked(time.Now())
		s.mu.Unlock()
		t.Reset(next)
	}
}

// tendStandbyLocked does what the slot needs now and says when to look
// again (sooner when woken).
func (s *Server) tendStandbyLocked(now time.Time) time.Duration {
	const later = time.Hour
	if s.draining {
		return later
	}
	if c := s.standby; c != nil {
		age := now.Sub(c.readyAt)
		switch {
		case c.state != childReady:
			// Still starting (a slow start is not recycled half-way;
			// the group's own deadline bounds it): woken when ready.
			return later
		case age >= s.cfg.StandbyMaxAge:
			s.discardLocked(c, replacedMaxAge)
			return later
		}
		return s.cfg.StandbyMaxAge - age
	}
	if s.active != nil || s.live > 0 {
		// Woken when the attempt's or the old standby's processes are
		// gone.
		return later
	}
	if wait := s.standbyRetryAt.Sub(now); wait > 0 {
		return wait
	}
	s.standby = s.newChildLocked(nil)
	return s.cfg.StandbyMaxAge
}

// standbyAge is the age of the standby waiting for an attempt, in seconds.
func (s *Server) standbyAge() float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.standby == nil {
		return 0
	}
	return s.standby.age().Seconds()
}

// age is how long a ready standby has waited, or how long one not ready
// yet has been starting.
func (c *slotChild) age() time.Duration {
	if c.state == childReady {
		return time.Since(c.readyAt)
	}
	return time.Since(c.created)
}

// standbyInfoLocked is the standby as /readyz shows it.
func (s *Server) standbyInfoLocked() map[string]any {
	c := s.standby
	switch {
	case s.cfg.noLaunchProbe:
		return map[string]any{"state": "off"}
	case c == nil:
		return map[string]any{"state": "none"}
	case c.state == childReady:
		return map[string]any{"state": "ready", "age_seconds": int64(c.age().Seconds())}
	default:
		return map[string]any{"state": "preparing", "age_seconds": int64(c.age().Seconds())}
	}
}
