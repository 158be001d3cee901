package renderer

import (
	"encoding/json"
	"fmt"
	"io"
	"time"

	"go.uber.org/zap"

	"slidecells/renderer/chromium"
	"slidecells/renderer/egress"
	"slidecells/renderer/supervisor"
	"slidecells/shared/logging"
)

// probeBudget bounds one launch probe.
const probeBudget = 30 * time.Second

// prober runs the launch probe at start and then every
// LaunchProbeInterval while the slot is idle, until shutdown.
func (s *Server) prober() {
	s.probeOnce()
	t := time.NewTicker(s.cfg.LaunchProbeInterval)
	defer t.Stop()
	for {
		select {
		case <-s.janitorStop:
			return
		case <-t.C:
			s.probeOnce()
		}
	}
}

// probeOnce starts a real headless browser with its sandbox, inside the
// same namespaces, cgroup limits, user range and egress path as an attempt,
// and records whether it opened a page. It holds the slot meanwhile (one
// process group per instance), and skips its turn when the slot is busy or
// the renderer drains.
func (s *Server) probeOnce() {
	s.mu.Lock()
	if s.active != nil || s.probing || s.draining {
		s.mu.Unlock()
		return
	}
	s.probing = true
	s.idle = make(chan struct{})
	s.mu.Unlock()

	started := time.Now()
	problem := s.runProbe()
	s.metrics.stage("launch_probe", time.Since(started))

	s.mu.Lock()
	prev := s.probeState
	if problem == "" {
		s.probeState = "ok"
		s.metrics.probes.WithLabelValues("ok").Inc()
		s.metrics.ready.Set(1)
	} else {
		s.probeState = "failed: " + problem
		s.metrics.probes.WithLabelValues("failed").Inc()
		s.metrics.ready.Set(0)
	}
	s.probing = false
	close(s.idle)
	state := s.probeState
	s.mu.Unlock()
	if state != prev {
		if problem == "" {
			s.log.Info("launch probe ok", zap.Duration("took", time.Since(started)))
		} else {
			s.log.Error("launch probe failed; not ready", zap.String("problem", problem))
		}
	}
}

func (s *Server) runProbe() string {
	job := chromium.Job{
		AttemptID:     "probe",
		Probe:         true,
		Browser:       chromium.BrowserSettings{Path: s.cfg.BrowserPath, Locale: chromium.Locale, Timezone: chromium.Timezone},
		Document:      chromium.DocumentSettings{AllowedOrigins: s.origins},
		Budget:        childBudget(probeBudget),
		BrowserLog:    s.cfg.BrowserLog,
		EgressProxy:   egress.Addr,
		NoBrowserGate: s.cfg.noBrowserGate,
	}
	input, _ := json.Marshal(job)
	var proxy *egress.Proxy
	g, err := s.startChild(s.childSpec(input, time.Now().Add(probeBudget), s.log.With(zap.String("attempt_id", "probe")), &proxy))
	if err != nil {
		return "isolation: " + err.Error()
	}
	var result *chromium.ChildResult
	browser := false
	_ = chromium.ReadEvents(g.Stdout(), func(e chromium.Event, body io.Reader) error {
		switch e.Type {
		case chromium.EventBrowserStarted:
			browser = true
		case chromium.EventResult:
			result = e.Result
		}
		return nil
	})
	_, _ = io.Copy(io.Discard, g.Stdout())
	<-g.Done()
	out := g.Outcome()
	s.metrics.isolation(out.Isolation)
	s.metrics.limits(out, proxy)
	switch {
	case result == nil:
		return "child ended without a result: " + tail(logging.Redact(out.Stderr), 300)
	case result.Error != nil:
		return result.Error.Message + ": " + tail(logging.Redact(out.Stderr), 300)
	case !browser:
		return "browser did not start"
	}
	return ""
}

// isolationSelfTest runs /bin/true as an attempt would run its child.
func (s *Server) isolationSelfTest() error {
	var proxy *egress.Proxy
	spec := s.childSpec(nil, time.Now().Add(15*time.Second), s.log.With(zap.String("attempt_id", "isolation-self-test")), &proxy)
	spec.Path, spec.Args = "/bin/true", nil
	g, err := supervisor.Start(spec)
	if err != nil {
		return fmt.Errorf("attempt isolation unavailable: %w", err)
	}
	_, _ = io.Copy(io.Discard, g.Stdout())
	<-g.Done()
	if out := g.Outcome(); out.ExitCode != 0 {
		return fmt.Errorf("attempt isolation unavailable: test child exited %d: %s", out.ExitCode, tail(logging.Redact(out.Stderr), 300))
	}
	return nil
}
