package renderer

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"image/png"
	"io"
	"net"
	"os"
	"path/filepath"
	"time"

	"go.uber.org/zap"

	"slidecells/renderer/chromium"
	"slidecells/renderer/egress"
	"slidecells/renderer/supervisor"
	"slidecells/shared/digest"
	"slidecells/shared/logging"
	rc "slidecells/shared/rendercontract"
	"slidecells/shared/ticket"
)

// attempt is one execution on this worker. All fields are guarded by the
// server's mutex except where noted.
type attempt struct {
	s       *Server
	receipt rc.Receipt
	// req keeps what the runner needs; the preview token is not kept
	// here, it goes to the child and is forgotten.
	req           rc.ExecutionRequest
	hard          time.Time
	retainUntil   time.Time
	ticketStopBy  time.Time
	ticketAccept  time.Time
	rejected      *rc.Error
	group         *supervisor.Group
	stopReason    supervisor.StopReason
	cancelVersion int64
	artifacts     map[rc.ArtifactName]*storedArtifact
	// traceparent is the coordinator's trace context of the attempt, or "" (see
	// attemptTraceparent); only run reads it, and replaces it by its own span's (traceRun).
	traceparent string
	// child is the standby admission gave the attempt, until its runner
	// binds it; warm says whether its browser was ready then.
	child *slotChild
	warm  bool
	// changed is closed when receipt.State next changes (setStateLocked), or nil while no
	// receipt long-poll waits for it (changedLocked makes it).
	changed chan struct{}
}

type storedArtifact struct {
	path string
	desc rc.Artifact
}

func newAttempt(req *rc.ExecutionRequest, s *Server, claims *ticket.Admission, now time.Time) *attempt {
	r := *req
	r.AdmissionTicket = ""
	r.PreviewAccess.Token = ""
	a := &attempt{
		s:            s,
		req:          r,
		ticketStopBy: claims.StopBy,
		ticketAccept: claims.AcceptBy,
		artifacts:    map[rc.ArtifactName]*storedArtifact{},
		receipt: rc.Receipt{
			SchemaVersion:   rc.ResultSchemaVersion,
			ContractVersion: rc.ContractVersion,
			RequestID:       req.RequestID,
			AttemptID:       req.AttemptID,
			WorkerID:        s.cfg.WorkerID,
			Epoch:           s.epoch,
			SlotGeneration:  claims.SlotGeneration,
			RequestDigest:   req.RequestDigest,
			Operation:       req.Operation,
			TraceID:         req.TraceID,
			State:           rc.StateAccepted,
			ResourceState:   rc.ResourceHeld,
		},
	}
	a.receipt.Times.AcceptedAt = ptr(now.UTC())
	return a
}

// retention is how long the receipt is kept: past the ticket's stop
// deadline and the result's retention, plus the mark retention.
func (a *attempt) retention(now time.Time) time.Time {
	until := now.Add(a.s.cfg.ResultTTL)
	for _, t := range []time.Time{a.ticketStopBy, a.ticketAccept} {
		if t.After(until) {
			until = t
		}
	}
	return until.Add(a.s.cfg.MarkRetention)
}

// snapshot copies the receipt for an answer.
func (a *attempt) snapshot() rc.Receipt {
	r := a.receipt
	if a.receipt.Result != nil {
		res := *a.receipt.Result
		res.Artifacts = append([]rc.Artifact(nil), res.Artifacts...)
		r.Result = &res
	}
	if !a.hard.IsZero() {
		r.HardDeadline = ptr(a.s.cfg.now().UTC().Add(time.Until(a.hard)).Truncate(time.Millisecond))
	}
	return r
}

// setStateLocked changes the receipt's state. Every change goes through it, so a receipt
// long-poll waiting for the attempt to leave its state (Server.awaitReceipt) is woken by
// construction, never by a poll.
func (a *attempt) setStateLocked(st rc.AttemptState) {
	if a.receipt.State == st {
		return
	}
	a.receipt.State = st
	if a.changed != nil {
		close(a.changed)
		a.changed = nil
	}
}

// changedLocked is closed at the receipt's next state change.
func (a *attempt) changedLocked() <-chan struct{} {
	if a.changed == nil {
		a.changed = make(chan struct{})
	}
	return a.changed
}

// requestStopLocked marks the attempt stopped; the first reason wins.
func (a *attempt) requestStopLocked(reason supervisor.StopReason) {
	if a.stopReason == "" {
		a.stopReason = reason
	}
	if a.group != nil {
		a.group.Stop(a.stopReason)
	}
}

func (a *attempt) dropArtifacts() {
	for _, art := range a.artifacts {
		_ = os.Remove(art.path)
	}
	a.artifacts = map[rc.ArtifactName]*storedArtifact{}
}

// childEvents collects what the child reported; only the runner goroutine
// touches it.
type childEvents struct {
	result    *chromium.ChildResult
	resultAt  time.Time
	artifacts map[rc.ArtifactName]*storedArtifact
	streamErr error
	// egress is the attempt's egress proxy (closed by then), for its
	// counts and the limit it met.
	egress *egress.Proxy
}

// run hands the attempt to its slot child: the standby admission gave it,
// or a child it starts now (cold). The child's runner (runChild) reads the
// attempt's events and publishes the terminal receipt once the child is
// proven gone.
func (s *Server) run(a *attempt, previewToken string) {
	log := s.log.With(zap.String("attempt_id", a.req.AttemptID), zap.String("request_id", a.req.RequestID),
		zap.String("workspace_id", a.req.WorkspaceID), zap.String("trace_id", a.req.TraceID))
	endSpan := s.traceRun(a)
	defer endSpan()
	job := chromium.Job{
		AttemptID: a.req.AttemptID,
		TraceID:   a.req.TraceID,
		Operation: a.req.Operation,
		Viewport:  a.req.Viewport,
		Scenes:    a.req.OperationOptions.Scenes,
		Browser:   chromium.BrowserSettings{Path: s.cfg.BrowserPath, Locale: chromium.Locale, Timezone: chromium.Timezone},
		Document: chromium.DocumentSettings{
			URL:            s.documentURL(a.req.SnapshotRef),
			AllowedOrigins: s.origins,
			AccessToken:    previewToken,
			ArtifactID:     a.req.SnapshotRef,
			InputDigest:    a.req.InputDigest,
			HostBuild:      s.profile.PreviewHostBuild,
		},
		Budget:        childBudget(time.Until(a.hard)),
		ContentReady:  s.cfg.ContentReady,
		BrowserLog:    s.cfg.BrowserLog,
		EgressProxy:   egress.Addr,
		NoBrowserGate: s.cfg.noBrowserGate,
		Traceparent:   a.traceparent,
	}
	input, _ := json.Marshal(job)

	if s.cfg.beforeRun != nil {
		s.cfg.beforeRun()
	}
	s.mu.Lock()
	c, warm := a.child, a.warm
	a.child = nil
	if a.stopReason != "" {
		// Cancelled (or shut down) between admission and start: nothing
		// was started for it, and a standby it took is discarded unused.
		if c != nil {
			s.discardLocked(c, "")
		}
		s.finishLocked(a, nil, supervisor.Outcome{StopReason: a.stopReason}, log)
		s.mu.Unlock()
		return
	}
	onPhase := func(p supervisor.Phase, at time.Time) {
		s.mu.Lock()
		defer s.mu.Unlock()
		switch p {
		case supervisor.PhaseStopping:
			a.receipt.Times.StopRequestedAt = ptr(at.UTC())
			a.setStateLocked(rc.StateCleaning)
			a.receipt.ResourceState = rc.ResourceReleasing
		case supervisor.PhaseCleaning:
			a.receipt.Times.CleanupStartedAt = ptr(at.UTC())
			a.setStateLocked(rc.StateCleaning)
			a.receipt.ResourceState = rc.ResourceReleasing
		case supervisor.PhaseUnreleased:
			a.receipt.ResourceState = rc.ResourceUnreleased
		}
	}
	for try := 0; ; try++ {
		if c == nil {
			c, warm = s.newChildLocked(a), false
		}
		c.log = log
		s.mu.Unlock()
		<-c.started
		if c.startErr != nil {
			log.Error("execution child did not start", zap.Error(c.startErr))
			s.mu.Lock()
			s.finishLocked(a, &childEvents{}, supervisor.Outcome{}, log)
			a.receipt.Error = rc.NewError(rc.CodeInternal, rc.StageLaunch, "execution child did not start").WithTrace(a.req.TraceID)
			s.mu.Unlock()
			return
		}
		err := c.g.Bind(supervisor.Binding{Input: input, HardDeadline: a.hard, OnPhase: onPhase, Log: log})
		s.mu.Lock()
		if err == nil {
			break
		}
		// The standby ended between admission and hand-over (it died or
		// failed its check): it is accounted as such, and the attempt
		// starts its own child.
		log.Warn("standby gone at hand-over; starting the attempt's own child", zap.Error(err))
		c.attempt = nil
		c = nil
		if try > 0 {
			s.finishLocked(a, &childEvents{}, supervisor.Outcome{}, log)
			a.receipt.Error = rc.NewError(rc.CodeInternal, rc.StageLaunch, "execution child did not start").WithTrace(a.req.TraceID)
			s.mu.Unlock()
			return
		}
	}
	a.group = c.g
	a.receipt.Times.ChildStartedAt = ptr(s.cfg.now().UTC())
	start := "cold"
	if warm {
		start = "warm"
	}
	s.metrics.attemptStarts.WithLabelValues(start).Inc()
	if a.stopReason != "" {
		c.g.Stop(a.stopReason)
	}
	s.mu.Unlock()
	log.Debug("attempt bound to its child", zap.String("start", start))
}

// attemptEvent records one event of the attempt's child.
func (s *Server) attemptEvent(a *attempt, ev *childEvents, e chromium.Event, body io.Reader) error {
	switch e.Type {
	case chromium.EventBrowserStarted:
		s.mu.Lock()
		a.receipt.Times.BrowserStartedAt = ptr(e.At.UTC())
		if a.receipt.State == rc.StateAccepted {
			a.setStateLocked(rc.StateRunning)
		}
		s.mu.Unlock()
	case chromium.EventReady:
		s.mu.Lock()
		a.receipt.Times.ReadyAt = ptr(e.At.UTC())
		s.mu.Unlock()
	case chromium.EventArtifact:
		art, err := s.store(a, e.Artifact, body)
		if err != nil {
			return err
		}
		ev.artifacts[art.desc.Name] = art
	case chromium.EventResult:
		ev.result, ev.resultAt = e.Result, s.cfg.now()
		s.mu.Lock()
		a.receipt.Times.WorkFinishedAt = ptr(e.At.UTC())
		s.mu.Unlock()
	}
	return nil
}

// childSpec is the supervisor's spec of one child: the attempt's or the
// launch probe's, with the same namespaces, limits, user range and egress.
// The attempt's egress proxy is stored in *proxy once it serves.
func (s *Server) childSpec(input []byte, hard time.Time, log *zap.Logger, proxy **egress.Proxy) supervisor.Spec {
	return supervisor.Spec{
		Path:         s.cfg.ChildCommand[0],
		Args:         s.cfg.ChildCommand[1:],
		Env:          func(dir string) []string { return append(chromium.ChildEnv(dir), s.cfg.ChildExtraEnv...) },
		UIDs:         &s.cfg.ChildUIDs,
		Cgroups:      s.cgroups,
		CgroupLimits: s.cfg.ChildCgroup,
		TempRoot:     s.cfg.TempRoot,
		TempBytes:    s.cfg.ChildTempBytes,
		Hide:         s.cfg.HidePaths,
		Limits:       s.cfg.Limits,
		Egress: func(listen func(network, addr string) (net.Listener, error)) (io.Closer, error) {
			ln, err := listen("tcp", egress.Addr)
			if err != nil {
				return nil, err
			}
			p := s.egress.Proxy()
			p.Serve(ln)
			*proxy = p
			return p, nil
		},
		Input:        input,
		HardDeadline: hard,
		Grace:        s.cfg.CleanupGrace,
		Log:          log,
	}
}

// startChild starts a child through the supervisor (tests replace it to
// count starts).
func (s *Server) startChild(spec supervisor.Spec) (*supervisor.Group, error) {
	if s.cfg.beforeStart != nil {
		s.cfg.beforeStart()
	}
	g, err := supervisor.Start(spec)
	if s.cfg.afterStart != nil {
		s.cfg.afterStart()
	}
	return g, err
}

// finishLocked publishes the terminal receipt. The supervisor has proven
// the process group gone (or nothing was started), so resource_state is
// released; only now is the slot free.
func (s *Server) finishLocked(a *attempt, ev *childEvents, out supervisor.Outcome, log *zap.Logger) {
	now := s.cfg.now().UTC()
	r := &a.receipt
	a.setStateLocked(rc.StateTerminal)
	r.ResourceState = rc.ResourceReleased
	r.Times.TerminalAt = ptr(now)
	if !out.ReleasedAt.IsZero() {
		r.Times.CleanupFinishedAt = ptr(out.ReleasedAt.UTC())
	} else {
		r.Times.CleanupFinishedAt = ptr(now)
	}
	if r.Times.CleanupStartedAt == nil {
		r.Times.CleanupStartedAt = r.Times.CleanupFinishedAt
	}
	fail := func(outcome rc.Outcome, e *rc.Error) {
		r.Outcome = outcome
		r.Error = e.WithTrace(a.req.TraceID)
		if ev != nil {
			for _, art := range ev.artifacts {
				_ = os.Remove(art.path)
			}
		}
	}
	reason := a.stopReason
	if reason == "" {
		reason = out.StopReason
	}
	switch {
	case r.CancelRequested:
		// Cancellation wins over anything the child produced: the
		// backend decided the result is not wanted.
		fail(rc.OutcomeCancelled, rc.NewError(rc.CodeCancelled, stageOf(r), "attempt cancelled; resources released"))
	case reason == supervisor.StopDeadline && ev != nil && ev.result != nil && ev.result.Error != nil && ev.result.Error.Code == rc.CodeDeadlineExceeded:
		// The child ran out of its own (earlier) deadline and said so in
		// time, with its facts; the hard deadline then caught it closing
		// the browser. Its report is the better one.
		fail(rc.OutcomeExpired, ev.result.Error)
	case reason == supervisor.StopDeadline:
		fail(rc.OutcomeExpired, rc.NewError(rc.CodeDeadlineExceeded, stageOf(r), "hard deadline reached; the process group was stopped and reclaimed"))
	case reason == supervisor.StopShutdown:
		fail(rc.OutcomeFailed, rc.NewError(rc.CodeBrowserLost, stageOf(r), "renderer shut down during the attempt; resources released"))
	case ev == nil:
		fail(rc.OutcomeCancelled, rc.NewError(rc.CodeCancelled, rc.StageAdmission, "attempt stopped before it started"))
	case ev.streamErr != nil:
		code := rc.CodeResultLost
		if errors.Is(ev.streamErr, chromium.ErrFrameTooLarge) {
			code = rc.CodeOutputLimitExceeded
		}
		fail(rc.OutcomeFailed, rc.NewError(code, rc.StageResult, "execution child's output was not usable"))
	case ev.result == nil:
		log.Warn("execution child ended without a result", zap.Int("exit_code", out.ExitCode), zap.String("stderr", tail(logging.Redact(out.Stderr), 2048)))
		fail(rc.OutcomeFailed, rc.NewError(rc.CodeBrowserLost, stageOf(r), "execution process ended without a result"))
	case ev.result.Error != nil:
		outcome := rc.OutcomeFailed
		if ev.result.Error.Code == rc.CodeDeadlineExceeded {
			outcome = rc.OutcomeExpired
		}
		if limit := egressLimit(ev); limit != "" && ev.result.Error.Code == rc.CodeAssetNotReady {
			// The resources failed because the page needed more
			// than the attempt's egress allows: the same input would
			// fail again.
			e := *ev.result.Error
			e.Retryable = false
			e.Message = "the attempt's egress limit (" + limit + ") was reached: " + e.Message
			ev.result.Error = &e
		}
		log.Info("attempt failed", zap.String("code", string(ev.result.Error.Code)), zap.String("stage", string(ev.result.Error.Stage)),
			zap.String("stderr", tail(logging.Redact(out.Stderr), 1024)))
		fail(outcome, ev.result.Error)
	default:
		want := rc.ArtifactFor(a.req.Operation)
		art, ok := ev.artifacts[want]
		if !ok {
			fail(rc.OutcomeFailed, rc.NewError(rc.CodeResultLost, rc.StageResult, "child reported success without its artifact"))
			break
		}
		renderDigest, _ := rc.RenderDigest(s.envDigest, a.req.Operation, a.req.Viewport, a.req.OperationOptions)
		a.artifacts = map[rc.ArtifactName]*storedArtifact{want: art}
		r.Outcome = rc.OutcomeSucceeded
		r.Result = &rc.Result{
			Operation:           a.req.Operation,
			InputDigest:         ev.result.InputDigest,
			RenderProfileDigest: s.envDigest,
			RenderDigest:        renderDigest,
			HostBuild:           ev.result.HostBuild,
			ArtifactID:          ev.result.ArtifactID,
			State:               rc.ResultAvailable,
			ExpiresAt:           now.Add(s.cfg.ResultTTL),
			Artifacts:           []rc.Artifact{art.desc},
			FinishedAt:          ev.resultAt.UTC(),
			CleanupCompletedAt:  *r.Times.CleanupFinishedAt,
		}
	}
	a.retainUntil = a.retention(now)
	s.metrics.outcome(r.Outcome)
	s.metrics.failed(r.Error)
	t := &r.Times
	s.metrics.between("launch", t.ChildStartedAt, t.BrowserStartedAt)
	s.metrics.between("readiness", t.BrowserStartedAt, t.ReadyAt)
	s.metrics.between("work", t.ReadyAt, t.WorkFinishedAt)
	s.metrics.between("cleanup", t.CleanupStartedAt, t.CleanupFinishedAt)
	s.metrics.between("total", t.AcceptedAt, t.TerminalAt)
	fields := []zap.Field{zap.String("outcome", string(r.Outcome)), zap.Int("processes_reclaimed", out.ProcessesReclaimed),
		zap.Bool("grace_expired", out.GraceExpired)}
	if out.OOMKills > 0 {
		fields = append(fields, zap.Int("oom_kills", out.OOMKills))
	}
	if ev != nil && ev.egress != nil {
		fields = append(fields, zap.Int64("egress_bytes", ev.egress.Bytes()), zap.Int64("egress_admitted", ev.egress.Admitted()),
			zap.Int64("egress_blocked", ev.egress.Blocked()))
		if l := ev.egress.LimitHit(); l != "" {
			fields = append(fields, zap.String("egress_limit", l))
		}
	}
	if ev != nil && ev.result != nil && ev.result.IgnoredReadinessCalls > 0 {
		// Content called the readiness binding from somewhere the renderer does not trust
		// (an iframe, another document): worth knowing, never acted on.
		fields = append(fields, zap.Int("ignored_readiness_calls", ev.result.IgnoredReadinessCalls))
	}
	log.Info("attempt terminal", fields...)
	if s.active == a {
		s.active = nil
		close(s.idle)
	}
}

// egressLimit is the egress limit the attempt met, or "".
func egressLimit(ev *childEvents) string {
	if ev == nil || ev.egress == nil {
		return ""
	}
	return ev.egress.LimitHit()
}

// Child deadline margin: the child's own deadline ends this long before the
// hard deadline, so a child that runs out of time still reports what it saw
// (pending resources, the stage) in a result the receipt keeps, before the
// supervisor stops it. It is DefaultChildDeadlineMargin, but at most a
// quarter of the budget, so short budgets keep most of their time.
const DefaultChildDeadlineMargin = 1500 * time.Millisecond

func childBudget(untilHard time.Duration) time.Duration {
	m := DefaultChildDeadlineMargin
	if q := untilHard / 4; q < m {
		m = q
	}
	return untilHard - m
}

func stageOf(r *rc.Receipt) rc.Stage {
	switch {
	case r.Times.WorkFinishedAt != nil:
		return rc.StageCleanup
	case r.Times.ReadyAt != nil:
		if r.Operation == rc.OpPageCapture {
			return rc.StageCapture
		}
		return rc.StageDiagnose
	case r.Times.BrowserStartedAt != nil:
		return rc.StageReadiness
	default:
		return rc.StageLaunch
	}
}

// store writes one artifact frame into the private result store, checking
// size, type and (for PNGs) the pixel size against the request.
func (s *Server) store(a *attempt, f *chromium.ArtifactFrame, body io.Reader) (*storedArtifact, error) {
	if f.Name != rc.ArtifactFor(a.req.Operation) {
		return nil, fmt.Errorf("unexpected artifact %s for %s", f.Name, a.req.Operation)
	}
	name := make([]byte, 12)
	_, _ = rand.Read(name)
	path := filepath.Join(s.results, hex.EncodeToString(name))
	file, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, err
	}
	h := sha256.New()
	var head bytes.Buffer
	n, err := io.Copy(io.MultiWriter(file, h, &limitedBuffer{buf: &head, max: 64 << 10}), body)
	if cerr := file.Close(); err == nil {
		err = cerr
	}
	if err == nil && n != f.Bytes {
		err = fmt.Errorf("artifact frame announced %d bytes, got %d", f.Bytes, n)
	}
	desc := rc.Artifact{Name: f.Name, ContentType: f.Name.ContentType(), Bytes: n, SHA256: digest.FromSum(h.Sum(nil))}
	if err == nil {
		switch f.Name {
		case rc.ArtifactCapture:
			cfg, derr := png.DecodeConfig(bytes.NewReader(head.Bytes()))
			w, hgt := a.req.Viewport.PhysicalSize()
			if derr != nil || cfg.Width != w || cfg.Height != hgt {
				err = fmt.Errorf("capture is not a %dx%d PNG", w, hgt)
			}
			desc.Width, desc.Height = w, hgt
		case rc.ArtifactDiagnosis:
			b, rerr := os.ReadFile(path)
			if rerr != nil || !json.Valid(b) {
				err = errors.New("diagnosis is not JSON")
			}
		}
	}
	if err != nil {
		_ = os.Remove(path)
		return nil, err
	}
	return &storedArtifact{path: path, desc: desc}, nil
}

type limitedBuffer struct {
	buf *bytes.Buffer
	max int
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := l.max - l.buf.Len(); room > 0 {
		if len(p) < room {
			room = len(p)
		}
		l.buf.Write(p[:room])
	}
	return len(p), nil
}

func (s *Server) documentURL(snapshotRef string) string {
	u := *s.cfg.PreviewBaseURL
	u.Path = rc.PreviewPath(u.Path, snapshotRef)
	u.RawPath = ""
	return u.String()
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
