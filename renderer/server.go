package renderer

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"slidecells/renderer/egress"
	"slidecells/renderer/supervisor"
	"slidecells/shared/digest"
	rc "slidecells/shared/rendercontract"
	"slidecells/shared/ticket"
)

// Server is the control process: HTTP protocol, slot, receipts.
type Server struct {
	cfg       Config
	log       *zap.Logger
	epoch     string
	profile   rc.RenderProfile
	envDigest string
	started   time.Time
	results   string
	host      rc.HostIdentity // where this epoch runs (identity.go)

	mu         sync.Mutex
	attempts   map[string]*attempt
	marks      map[string]cancelMark
	generation int64
	active     *attempt
	draining   bool
	idle       chan struct{} // closed while the slot is free

	metrics *metrics
	cgroups *supervisor.Cgroups
	// origins are the preview and asset origins; egress admits exactly
	// them, within the attempt's limits. Both are built once.
	origins []string
	egress  *egress.Policy
	// probeState is "pending", "ok" or the reason of the last failure of
	// the launch probe, which every standby is: "ok" once a standby's
	// browser started inside the attempt's boundary and answered.
	probeState string
	// standby is the slot child prepared for the next attempt (nil while
	// none waits); live counts the slot's process groups not yet proven
	// gone (liveZero is closed while it is 0). See standby.go.
	standby         *slotChild
	live            int
	liveZero        chan struct{}
	standbyWake     chan struct{}
	standbyRetryAt  time.Time
	standbyFailures int

	janitorStop chan struct{}
	janitorDone chan struct{}
	stopOnce    sync.Once
}

type cancelMark struct {
	at      time.Time
	version int64
}

// New prepares the server: temp root, result store, epoch. The checks that need nothing run
// first; on a failure after the cgroups are opened they are closed again.
func New(cfg Config, profile rc.RenderProfile, log *zap.Logger) (s *Server, err error) {
	if log == nil {
		log = zap.NewNop()
	}
	if len(cfg.ChildCommand) == 0 {
		return nil, errors.New("renderer: no child command configured")
	}
	if len(cfg.ServiceTokens) == 0 {
		return nil, errors.New("renderer: a service credential is required (RENDER_SERVICE_CREDENTIAL_FILE)")
	}
	cfg.CleanupGrace = cmp.Or(cfg.CleanupGrace, DefaultCleanupGrace)
	cfg.ResultTTL = cmp.Or(cfg.ResultTTL, DefaultResultTTL)
	cfg.MarkRetention = cmp.Or(cfg.MarkRetention, DefaultMarkRetention)
	cfg.LaunchProbeInterval = cmp.Or(cfg.LaunchProbeInterval, DefaultLaunchProbe)
	cfg.StandbyMaxAge = cmp.Or(cfg.StandbyMaxAge, DefaultStandbyMaxAge)
	cfg.MaxReceipts = cmp.Or(cfg.MaxReceipts, DefaultMaxReceipts)
	cfg.MaxCancelMarks = cmp.Or(cfg.MaxCancelMarks, DefaultMaxCancelMarks)
	envDigest, err := profile.Digest()
	if err != nil {
		return nil, err
	}
	origins := cfg.allowedOrigins()
	policy, err := egress.NewPolicy(origins, cfg.Egress)
	if err != nil {
		return nil, err
	}
	// The child user must reach its own attempt directory below the
	// root, and nothing else: 0711 lets it traverse without listing.
	if err := os.MkdirAll(cfg.TempRoot, 0o711); err != nil {
		return nil, fmt.Errorf("RENDER_TEMP_ROOT: %w", err)
	}
	if err := os.Chmod(cfg.TempRoot, 0o711); err != nil {
		return nil, fmt.Errorf("RENDER_TEMP_ROOT: %w", err)
	}
	if err := cfg.ChildUIDs.Check(); err != nil {
		return nil, fmt.Errorf("RENDER_CHILD_UID_RANGE: %w", err)
	}
	if cfg.CgroupName == "" {
		cfg.CgroupName = "slidecells-renderer-" + cfg.WorkerID
	}
	cgroups, err := supervisor.OpenCgroups(cfg.CgroupParent, cfg.CgroupName)
	if err != nil {
		return nil, fmt.Errorf("RENDER_CGROUP_PARENT: %w", err)
	}
	defer func() {
		if err != nil {
			_ = cgroups.Close()
		}
	}()
	if err := supervisor.CheckKernel(); err != nil {
		return nil, err
	}
	host, err := hostIdentity(cgroups.Dirs())
	if err != nil {
		return nil, err
	}
	// Leftovers of an earlier epoch (a control process killed before it
	// could stop its attempt) are killed first, through the cgroup every
	// process of an attempt stays in whatever it does to its process
	// group, session or environment; only then are their folders removed.
	if n, err := cgroups.KillLeftovers(10 * time.Second); err != nil {
		return nil, fmt.Errorf("leftovers of an earlier epoch: %w", err)
	} else if n > 0 {
		log.Warn("killed processes left by an earlier epoch", zap.Int("processes", n))
	}
	if stale, err := filepath.Glob(filepath.Join(cfg.TempRoot, "a-*")); err == nil {
		more, _ := filepath.Glob(filepath.Join(cfg.TempRoot, "results-*"))
		for _, p := range append(stale, more...) {
			if err := os.RemoveAll(p); err != nil {
				log.Warn("stale attempt data not removed", zap.String("path", p), zap.Error(err))
			}
		}
	}
	epoch := make([]byte, 16)
	if _, err := rand.Read(epoch); err != nil {
		return nil, err
	}
	e := "ep_" + hex.EncodeToString(epoch)
	// Artifacts of this epoch live in a private directory the child
	// cannot read or write.
	results := filepath.Join(cfg.TempRoot, "results-"+e[3:15])
	if err := os.Mkdir(results, 0o700); err != nil {
		return nil, fmt.Errorf("RENDER_TEMP_ROOT: result store: %w", err)
	}
	s = &Server{
		cfg:         cfg,
		log:         log.With(zap.String("worker_id", cfg.WorkerID), zap.String("epoch", e)),
		epoch:       e,
		profile:     profile,
		envDigest:   envDigest,
		started:     cfg.now().UTC(),
		results:     results,
		host:        host,
		attempts:    map[string]*attempt{},
		marks:       map[string]cancelMark{},
		idle:        make(chan struct{}),
		metrics:     newMetrics(),
		cgroups:     cgroups,
		origins:     origins,
		egress:      policy,
		probeState:  "pending",
		liveZero:    make(chan struct{}),
		standbyWake: make(chan struct{}, 1),
		janitorStop: make(chan struct{}),
		janitorDone: make(chan struct{}),
	}
	// The isolation itself is checked before anything is accepted: a
	// trivial child through exactly the attempt's namespaces, cgroup,
	// user switch and egress path. Where the kernel cannot provide them,
	// start-up fails with what went wrong; there is no weaker mode.
	if err := s.isolationSelfTest(); err != nil {
		return nil, err
	}
	s.log.Info("attempt isolation ready", zap.String("isolation_mode", string(supervisor.CurrentMode())),
		zap.Strings("cgroups", cgroups.Dirs()), zap.String("child_uid_range", fmt.Sprintf("%d-%d", cfg.ChildUIDs.First, cfg.ChildUIDs.Last)))
	close(s.idle)
	close(s.liveZero)
	s.metrics.standbyAge = s.standbyAge
	go s.janitor()
	if cfg.noLaunchProbe {
		s.probeState = "ok"
	} else {
		go s.standbyKeeper()
	}
	return s, nil
}

// Epoch is this start's epoch.
func (s *Server) Epoch() string { return s.epoch }

// EnvironmentDigest is the digest of the RenderProfile.
func (s *Server) EnvironmentDigest() string { return s.envDigest }

// Handler returns the HTTP handler.
func (s *Server) Handler() http.Handler {
	api := http.NewServeMux()
	root := rc.APIRoot
	api.HandleFunc("GET "+root+"/capabilities", s.capabilities)
	api.HandleFunc("POST "+root+"/executions", s.postExecution)
	api.HandleFunc("GET "+root+"/executions/{attempt_id}", s.getExecution)
	api.HandleFunc("PUT "+root+"/executions/{attempt_id}/cancellation", s.putCancellation)
	api.HandleFunc("GET "+root+"/executions/{attempt_id}/artifacts/{name}", s.getArtifact)
	api.HandleFunc("PUT "+root+"/executions/{attempt_id}/result-consumption", s.putConsumption)
	api.HandleFunc("GET /readyz", s.readyz)
	api.Handle("GET /metrics", s.metrics.handler())
	api.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, rc.NewError(rc.CodeContractMismatch, rc.StageAdmission, "no such endpoint in %s", rc.ContractVersion).In(rc.SituationNotFound))
	})
	mux := http.NewServeMux()
	// Liveness is the only answer without a credential: it says nothing
	// but "the process runs".
	mux.HandleFunc("GET /livez", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"live": true})
	})
	mux.Handle("/", s.auth(api))
	return mux
}

// auth requires one of the accepted service credentials (two during a
// rotation). Both candidates are always compared, each in constant time over
// fixed-length hashes, so neither the position of a mismatch, the length of
// a credential nor which one matched shows in the timing.
func (s *Server) auth(h http.Handler) http.Handler {
	want := make([][32]byte, len(s.cfg.ServiceTokens))
	for i, t := range s.cfg.ServiceTokens {
		want[i] = sha256.Sum256([]byte(t))
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		sum := sha256.Sum256([]byte(got))
		match := 0
		for i := range want {
			match |= subtle.ConstantTimeCompare(sum[:], want[i][:])
		}
		if !ok || got == "" || match != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="renderer"`)
			writeError(w, rc.NewError(rc.CodeUnauthenticated, rc.StageAdmission, "service credential missing or wrong"))
			return
		}
		h.ServeHTTP(w, r)
	})
}

func (s *Server) capabilities(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	slot := s.slotLocked()
	s.mu.Unlock()
	limits := rc.ContractLimits()
	limits.CleanupGraceMS = s.cfg.CleanupGrace.Milliseconds()
	limits.ResultTTLSeconds = int64(s.cfg.ResultTTL / time.Second)
	writeJSON(w, http.StatusOK, rc.Capabilities{
		WorkerID:          s.cfg.WorkerID,
		Epoch:             s.epoch,
		EnvironmentDigest: s.envDigest,
		ProtocolVersions:  rc.CurrentProtocolVersions(),
		Operations:        rc.Operations,
		Limits:            limits,
		Slot:              slot,
		Profile:           s.profile,
		StartedAt:         s.started,
		Host:              &s.host,
	})
}

func (s *Server) slotLocked() rc.Slot {
	slot := rc.Slot{State: rc.SlotIdle, SlotGeneration: s.generation}
	if s.standby == nil && s.live > 0 {
		// A discarded standby is still being released.
		slot.State = rc.SlotBusy
	}
	if s.active != nil {
		slot.State = rc.SlotBusy
		slot.AttemptID = s.active.receipt.AttemptID
	} else if s.draining {
		slot.State = rc.SlotDraining
	}
	return slot
}

// readyz reports execution environment health. A busy slot is not
// unreadiness.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	var problems []string
	s.mu.Lock()
	slot := s.slotLocked()
	draining := s.draining
	s.mu.Unlock()
	if draining {
		problems = append(problems, "draining")
	}
	if st, err := os.Stat(s.cfg.BrowserPath); err != nil || st.Mode()&0o111 == 0 {
		problems = append(problems, "browser binary missing")
	}
	if free, err := freeBytes(s.cfg.TempRoot); err != nil || free < s.cfg.MinFreeDiskBytes {
		problems = append(problems, "temp disk below the minimum free space")
	}
	s.mu.Lock()
	probe := s.probeState
	standby := s.standbyInfoLocked()
	s.mu.Unlock()
	if probe != "ok" {
		problems = append(problems, "launch probe "+probe)
	}
	status := http.StatusOK
	if len(problems) > 0 {
		status = http.StatusServiceUnavailable
	}
	writeJSON(w, status, map[string]any{"ready": len(problems) == 0, "problems": problems, "slot": slot, "standby": standby,
		"epoch": s.epoch, "environment_digest": s.envDigest})
}

func freeBytes(dir string) (uint64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return st.Bavail * uint64(st.Bsize), nil
}

func reject(code rc.Code, format string, args ...any) *rc.Error {
	return rc.NewError(code, rc.StageAdmission, format, args...)
}

func (s *Server) postExecution(w http.ResponseWriter, r *http.Request) {
	var req rc.ExecutionRequest
	dec := json.NewDecoder(io.LimitReader(r.Body, rc.MaxRequestBytes+1))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		writeError(w, rc.NewError(rc.CodeContractMismatch, rc.StageAdmission, "body is not an execution request of %s", rc.ContractVersion))
		return
	}
	if e := req.CheckShape(); e != nil {
		writeError(w, e.WithTrace(req.TraceID))
		return
	}
	rec, e := s.admit(&req, attemptTraceparent(r, &req))
	if e != nil {
		writeError(w, e)
		return
	}
	writeJSON(w, http.StatusAccepted, rec)
}

// admit runs every admission check before anything starts. It returns the
// receipt of an attempt taken over, or the refusal.
func (s *Server) admit(req *rc.ExecutionRequest, traceparent string) (rc.Receipt, *rc.Error) {
	now := s.cfg.now()
	log := s.log.With(zap.String("attempt_id", req.AttemptID), zap.String("request_id", req.RequestID),
		zap.String("workspace_id", req.WorkspaceID), zap.String("trace_id", req.TraceID))
	var claims ticket.Admission
	verr := s.cfg.TicketKeys.Verify(req.AdmissionTicket, now, &claims)
	authentic := verr == nil || errors.Is(verr, ticket.ErrExpired) || errors.Is(verr, ticket.ErrNotYetValid)
	if !authentic {
		log.Warn("admission ticket refused", zap.String("reason", verr.Error()))
		return rc.Receipt{}, rc.NewError(rc.CodeInputExpired, rc.StageAdmission, "admission ticket is not valid (%s)", strings.TrimPrefix(verr.Error(), "ticket: ")).WithTrace(req.TraceID)
	}
	if claims.AttemptID != req.AttemptID || claims.RequestID != req.RequestID ||
		claims.RequestDigest != req.RequestDigest || claims.WorkspaceID != req.WorkspaceID {
		return rc.Receipt{}, rc.NewError(rc.CodeInputExpired, rc.StageAdmission, "admission ticket is bound to another request").WithTrace(req.TraceID)
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	// Idempotency first: a repeat of something already decided gets the
	// same answer, even after the ticket's acceptance deadline.
	if a, ok := s.attempts[req.AttemptID]; ok {
		if a.receipt.RequestDigest != req.RequestDigest {
			return rc.Receipt{}, rc.NewError(rc.CodeContractMismatch, rc.StageAdmission, "attempt_id already used with another request_digest").WithTrace(req.TraceID).In(rc.SituationConflict)
		}
		if a.rejected != nil {
			return rc.Receipt{}, a.rejected
		}
		return a.snapshot(), nil
	}
	// An authentic ticket outside its window (clock skew, a dispatch that arrived late) or for
	// another epoch of this worker (it restarted inside the coordinator's registry lag) is a
	// condition of the node, not of the input: the coordinator retries elsewhere or later
	// without counting the attempt (render-execution.md: infrastructure, retryable).
	if verr != nil {
		return rc.Receipt{}, rc.NewError(rc.CodeServiceUnavailable, rc.StageAdmission, "admission ticket %s (clock skew or a late dispatch)", strings.TrimPrefix(verr.Error(), "ticket: token ")).WithTrace(req.TraceID)
	}
	if claims.WorkerID != s.cfg.WorkerID || claims.Epoch != s.epoch {
		return rc.Receipt{}, rc.NewError(rc.CodeServiceUnavailable, rc.StageAdmission, "admission ticket is for another worker or epoch (this worker restarted)").WithTrace(req.TraceID)
	}
	if claims.AcceptBy.Sub(claims.IssuedAt) > s.cfg.MarkRetention {
		return rc.Receipt{}, rc.NewError(rc.CodeInputExpired, rc.StageAdmission, "admission ticket lives longer than this worker keeps cancel marks (%s)", s.cfg.MarkRetention).WithTrace(req.TraceID)
	}
	if claims.SlotGeneration <= s.generation {
		// A fenced slot generation: capacity, not input (the slot was handed on).
		return rc.Receipt{}, rc.NewError(rc.CodeWorkerBusy, rc.StageAdmission, "slot generation %d is not above the accepted generation %d", claims.SlotGeneration, s.generation).WithTrace(req.TraceID)
	}
	if len(s.attempts) >= s.cfg.MaxReceipts {
		// Nothing can be recorded, so the refusal fences the slot
		// generation instead: a repeat of this attempt is refused by the
		// generation check and can never start later.
		s.generation = claims.SlotGeneration
		log.Warn("receipt table full; attempt refused", zap.Int("receipts", len(s.attempts)))
		return rc.Receipt{}, reject(rc.CodeServiceUnavailable, "worker keeps %d receipts already; not taken over", s.cfg.MaxReceipts).WithTrace(req.TraceID)
	}
	hard := s.hardDeadline(req, &claims, now)
	// From here on a refusal is recorded: a repeated POST of the same
	// attempt gets the same refusal and never starts it later.
	record := func(rej *rc.Error, outcome rc.Outcome) (rc.Receipt, *rc.Error) {
		rej = rej.WithTrace(req.TraceID)
		a := newAttempt(req, s, &claims, now)
		a.rejected = rej
		a.setStateLocked(rc.StateTerminal)
		a.receipt.Outcome = outcome
		a.receipt.ResourceState = rc.ResourceNone
		a.receipt.Error = rej
		a.receipt.Times.TerminalAt = ptr(now.UTC())
		a.retainUntil = a.retention(now)
		s.attempts[req.AttemptID] = a
		log.Info("attempt rejected", zap.String("code", string(rej.Code)))
		s.metrics.outcome(outcome)
		return rc.Receipt{}, rej
	}
	if m, ok := s.marks[req.AttemptID]; ok {
		delete(s.marks, req.AttemptID)
		rej := reject(rc.CodeCancelled, "attempt was cancelled before it arrived")
		rec, e := record(rej, rc.OutcomeCancelled)
		a := s.attempts[req.AttemptID]
		a.receipt.CancelRequested = true
		a.cancelVersion = m.version
		return rec, e
	}
	if req.RenderProfileDigest != s.envDigest {
		return record(reject(rc.CodeProfileMismatch, "render_profile_digest does not match this worker's environment digest"), rc.OutcomeRejected)
	}
	if !req.PreviewAccess.ExpiresAt.After(now) {
		return record(reject(rc.CodeInputExpired, "preview access has expired"), rc.OutcomeRejected)
	}
	if !hard.After(now) {
		return record(reject(rc.CodeDeadlineExceeded, "deadline passed before the attempt could start"), rc.OutcomeExpired)
	}
	if s.draining {
		return record(reject(rc.CodeServiceUnavailable, "worker is shutting down; not taken over"), rc.OutcomeRejected)
	}
	if free, err := freeBytes(s.cfg.TempRoot); err != nil || free < s.cfg.MinFreeDiskBytes {
		return record(reject(rc.CodeServiceUnavailable, "temp disk too full; not taken over"), rc.OutcomeRejected)
	}
	if s.active != nil || (s.standby == nil && s.live > 0) {
		return record(reject(rc.CodeWorkerBusy, "the slot is taken; not taken over"), rc.OutcomeRejected)
	}
	if s.probeState != "ok" {
		// A browser that cannot start here would only burn the
		// request's retry budget with RENDER_BROWSER_LOST.
		return record(reject(rc.CodeServiceUnavailable, "execution environment not ready (launch probe %s); not taken over", s.probeState), rc.OutcomeRejected)
	}
	s.generation = claims.SlotGeneration
	a := newAttempt(req, s, &claims, now)
	a.traceparent = traceparent
	a.hard = hard
	a.retainUntil = a.retention(now)
	s.attempts[req.AttemptID] = a
	s.active = a
	s.idle = make(chan struct{})
	// The standby is bound to this attempt now; it learns the job only
	// when the runner hands it over.
	a.child, a.warm = s.takeStandbyLocked(a)
	log.Info("attempt accepted", zap.Int64("slot_generation", claims.SlotGeneration), zap.String("operation", string(req.Operation)),
		zap.Duration("hard_deadline_in", time.Until(hard)))
	go s.run(a, req.PreviewAccess.Token)
	return a.snapshot(), nil
}

// hardDeadline is the smallest of deadline_at, the remaining budget and the
// ticket's stop_by, as a monotonic time: wall-clock jumps after admission do
// not move it.
func (s *Server) hardDeadline(req *rc.ExecutionRequest, claims *ticket.Admission, now time.Time) time.Time {
	d := req.DeadlineAt.Sub(now)
	if b := time.Duration(req.RemainingBudgetMS) * time.Millisecond; b < d {
		d = b
	}
	if st := claims.StopBy.Sub(now); st < d {
		d = st
	}
	return time.Now().Add(d)
}

func (s *Server) getExecution(w http.ResponseWriter, r *http.Request) {
	wait, e := parseReceiptWait(r.URL.Query())
	if e != nil {
		writeError(w, e)
		return
	}
	rec, ok := s.awaitReceipt(r.Context(), r.PathValue("attempt_id"), wait)
	if !ok {
		writeError(w, unknownAttempt())
		return
	}
	writeJSON(w, http.StatusOK, rec)
}

// receiptWait is a receipt query's long-poll (rc.QueryReceiptState, rc.QueryReceiptWaitMS):
// answer once the attempt has left state, or after d. The zero value answers at once.
type receiptWait struct {
	state rc.AttemptState
	d     time.Duration
}

// parseReceiptWait reads the long-poll parameters: both or neither, wait_ms an integer in
// 1..rc.MaxReceiptWaitMS, state one of the attempt states.
func parseReceiptWait(q url.Values) (receiptWait, *rc.Error) {
	st, hasState := q[rc.QueryReceiptState]
	ms, hasWait := q[rc.QueryReceiptWaitMS]
	if !hasState && !hasWait {
		return receiptWait{}, nil
	}
	bad := func(format string, args ...any) (receiptWait, *rc.Error) {
		return receiptWait{}, rc.NewError(rc.CodeContractMismatch, rc.StageRetrieval, format, args...)
	}
	if !hasState || !hasWait || len(st) != 1 || len(ms) != 1 {
		return bad("a receipt long-poll needs one %s and one %s", rc.QueryReceiptState, rc.QueryReceiptWaitMS)
	}
	n, err := strconv.Atoi(ms[0])
	if err != nil || n < 1 || n > rc.MaxReceiptWaitMS {
		return bad("%s is not an integer from 1 to %d", rc.QueryReceiptWaitMS, rc.MaxReceiptWaitMS)
	}
	state := rc.AttemptState(st[0])
	if !state.Valid() {
		return bad("%s is not an attempt state", rc.QueryReceiptState)
	}
	return receiptWait{state: state, d: time.Duration(n) * time.Millisecond}, nil
}

// awaitReceipt is the attempt's receipt once it is no longer in wait.state (or is terminal),
// or when wait.d has passed or ctx ended, whichever comes first; false for an attempt this
// epoch does not know. The wait holds no lock: it takes the attempt's change channel under
// s.mu, waits without it, and reads the receipt again under it.
func (s *Server) awaitReceipt(ctx context.Context, id string, wait receiptWait) (rc.Receipt, bool) {
	var timeout <-chan time.Time
	done := wait.d == 0
	for {
		s.mu.Lock()
		a, ok := s.attempts[id]
		if !ok || done || a.receipt.State != wait.state || a.receipt.Terminal() {
			var rec rc.Receipt
			if ok {
				rec = a.snapshot()
			}
			s.mu.Unlock()
			return rec, ok
		}
		changed := a.changedLocked()
		s.mu.Unlock()
		if timeout == nil {
			t := time.NewTimer(wait.d)
			defer t.Stop()
			timeout = t.C
		}
		if s.cfg.receiptWaiting != nil {
			s.cfg.receiptWaiting(id)
		}
		select {
		case <-changed:
		case <-timeout:
			done = true
		case <-ctx.Done():
			done = true
		}
	}
}

func unknownAttempt() *rc.Error {
	return rc.NewError(rc.CodeResultLost, rc.StageRetrieval, "no receipt for this attempt on this worker epoch (this does not mean it never ran)")
}

func (s *Server) putCancellation(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("attempt_id")
	if !rc.ValidID(id) {
		writeError(w, rc.NewError(rc.CodeContractMismatch, rc.StageAdmission, "attempt_id is not an ID"))
		return
	}
	var body rc.CancelRequest
	if r.ContentLength != 0 {
		if err := json.NewDecoder(io.LimitReader(r.Body, 4<<10)).Decode(&body); err != nil && err != io.EOF {
			writeError(w, rc.NewError(rc.CodeContractMismatch, rc.StageAdmission, "cancellation body is not JSON"))
			return
		}
	}
	now := s.cfg.now()
	s.mu.Lock()
	a, ok := s.attempts[id]
	if !ok {
		m, known := s.marks[id]
		if !known && len(s.marks) >= s.cfg.MaxCancelMarks {
			s.mu.Unlock()
			// Refusing is safe: the coordinator retries the cancel; a
			// dropped old mark could let a late dispatch start.
			writeError(w, rc.NewError(rc.CodeServiceUnavailable, rc.StageAdmission, "worker keeps %d cancel marks already; retry", s.cfg.MaxCancelMarks))
			return
		}
		if m.at.IsZero() {
			m.at = now
		}
		if body.CancelVersion > m.version {
			m.version = body.CancelVersion
		}
		s.marks[id] = m
		s.mu.Unlock()
		s.log.Info("cancel mark recorded before dispatch", zap.String("attempt_id", id))
		writeJSON(w, http.StatusAccepted, rc.CancelAnswer{AttemptID: id, MarkRecorded: true, CancelVersion: m.version})
		return
	}
	if body.CancelVersion > a.cancelVersion {
		a.cancelVersion = body.CancelVersion
	}
	if !a.receipt.Terminal() && !a.receipt.CancelRequested {
		a.receipt.CancelRequested = true
		a.requestStopLocked(supervisor.StopCancel)
		s.log.Info("cancel requested", zap.String("attempt_id", id))
	}
	rec := a.snapshot()
	version := a.cancelVersion
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, rc.CancelAnswer{AttemptID: id, CancelVersion: version, Receipt: &rec})
}

func (s *Server) getArtifact(w http.ResponseWriter, r *http.Request) {
	name := rc.ArtifactName(r.PathValue("name"))
	s.mu.Lock()
	a, ok := s.attempts[r.PathValue("attempt_id")]
	if !ok {
		s.mu.Unlock()
		writeError(w, unknownAttempt())
		return
	}
	if !name.Valid() {
		s.mu.Unlock()
		writeError(w, rc.NewError(rc.CodeContractMismatch, rc.StageRetrieval, "artifact name is not one of capture.png, diagnosis.json").In(rc.SituationNotFound))
		return
	}
	rec := a.snapshot()
	art, has := a.artifacts[name]
	s.mu.Unlock()
	switch {
	case !rec.Terminal():
		writeError(w, rc.NewError(rc.CodeResultLost, rc.StageRetrieval, "attempt is not terminal; no artifact yet").In(rc.SituationConflict))
		return
	case rec.Result == nil:
		writeError(w, rc.NewError(rc.CodeResultLost, rc.StageRetrieval, "attempt ended without a result"))
		return
	case rec.Result.State != rc.ResultAvailable:
		writeError(w, rc.NewError(rc.CodeResultLost, rc.StageRetrieval, "artifact was %s", rec.Result.State).In(rc.SituationGone))
		return
	case !has:
		writeError(w, rc.NewError(rc.CodeResultLost, rc.StageRetrieval, "this attempt has no %s", name))
		return
	}
	f, err := os.Open(art.path)
	if err != nil {
		// Reclaimed between the check and the open.
		writeError(w, rc.NewError(rc.CodeResultLost, rc.StageRetrieval, "artifact was reclaimed").In(rc.SituationGone))
		return
	}
	defer f.Close()
	sum, _ := hex.DecodeString(strings.TrimPrefix(art.desc.SHA256, digest.Prefix))
	w.Header().Set("Content-Type", art.desc.ContentType)
	w.Header().Set("Content-Length", strconv.FormatInt(art.desc.Bytes, 10))
	w.Header().Set(rc.HeaderArtifactSHA256, art.desc.SHA256)
	w.Header().Set("Repr-Digest", "sha-256=:"+base64.StdEncoding.EncodeToString(sum)+":")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	_, _ = io.CopyN(w, f, art.desc.Bytes)
}

func (s *Server) putConsumption(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	a, ok := s.attempts[r.PathValue("attempt_id")]
	if !ok {
		s.mu.Unlock()
		writeError(w, unknownAttempt())
		return
	}
	if !a.receipt.Terminal() {
		s.mu.Unlock()
		writeError(w, rc.NewError(rc.CodeContractMismatch, rc.StageRetrieval, "attempt is not terminal; nothing to consume").In(rc.SituationConflict))
		return
	}
	if a.receipt.Result != nil && a.receipt.Result.State == rc.ResultAvailable {
		a.receipt.Result.State = rc.ResultConsumed
		a.dropArtifacts()
	}
	rec := a.snapshot()
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, rec)
}

// janitor reclaims expired artifacts and forgets old receipts and marks.
func (s *Server) janitor() {
	defer close(s.janitorDone)
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-s.janitorStop:
			return
		case <-t.C:
		}
		now := s.cfg.now()
		s.mu.Lock()
		for id, a := range s.attempts {
			if !a.receipt.Terminal() {
				continue
			}
			if res := a.receipt.Result; res != nil && res.State == rc.ResultAvailable && now.After(res.ExpiresAt) {
				res.State = rc.ResultReclaimed
				a.dropArtifacts()
			}
			if now.After(a.retainUntil) {
				delete(s.attempts, id)
			}
		}
		for id, m := range s.marks {
			if now.Sub(m.at) > s.cfg.MarkRetention {
				delete(s.marks, id)
			}
		}
		s.mu.Unlock()
	}
}

// Shutdown stops accepting, stops the running attempt (mark stopped, ask
// the child to close, kill the group after the grace) and waits until its
// resources are released, or ctx ends.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.draining = true
	a := s.active
	idle := s.idle
	if a != nil {
		s.log.Info("shutdown: stopping the running attempt", zap.String("attempt_id", a.receipt.AttemptID))
		a.requestStopLocked(supervisor.StopShutdown)
	}
	if s.standby != nil {
		s.discardLocked(s.standby, "")
	}
	s.mu.Unlock()
	var err error
	select {
	case <-idle:
	case <-ctx.Done():
		err = ctx.Err()
	}
	s.stopOnce.Do(func() { close(s.janitorStop) })
	<-s.janitorDone
	s.mu.Lock()
	if s.standby != nil {
		// Prepared while the attempt ended.
		s.discardLocked(s.standby, "")
	}
	live := s.liveZero
	s.mu.Unlock()
	if err == nil {
		// Every slot child (a discarded standby) proven gone.
		select {
		case <-live:
		case <-ctx.Done():
			err = ctx.Err()
		}
	}
	if err == nil {
		_ = os.RemoveAll(s.results)
		// Nothing runs any more: the renderer's cgroup goes too.
		if cerr := s.cgroups.Close(); cerr != nil {
			s.log.Warn("renderer cgroup not removed", zap.Error(cerr))
		}
	}
	return err
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// writeError answers an error body with the status of the one table in
// rendercontract (code and situation decide it, nothing else).
func writeError(w http.ResponseWriter, e *rc.Error) {
	if e.Code == rc.CodeWorkerBusy {
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, e.HTTPStatus(), e)
}

func ptr[T any](v T) *T { return &v }
