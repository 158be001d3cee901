package renderer

import (
	"fmt"
	"io"
	"time"

	"go.uber.org/zap"

	"slidecells/renderer/egress"
	"slidecells/renderer/supervisor"
	"slidecells/shared/logging"
)

// The launch probe is the standby (standby.go): the next attempt's
// environment with a real sandboxed headless Chromium, started inside
// exactly the attempt's namespaces, cgroup limits, user range and egress,
// whose page must answer before /readyz turns 200 and attempts are taken
// over. A standby that never gets there makes the probe fail; the next one
// is tried after LaunchProbeInterval.

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
