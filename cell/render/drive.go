package render

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"image/png"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"
	gcblob "gocloud.dev/blob"

	"slidecells/shared/logging"
	rc "slidecells/shared/rendercontract"
	"slidecells/shared/ticket"
)

func zapErr(err error) zap.Field { return zap.Error(err) }

// reclaimTimeout is the shortest time a coordinator stage gets: once a request's budget is
// spent, its attempt still has to be stopped and its release proven.
const reclaimTimeout = 2 * time.Second

// stageTimeout is a coordinator stage's time: what is left of the request's budget, at most
// limit, at least reclaimTimeout (a caller never waits on it past the deadline: Wait expires
// the request there, whatever its driver is doing).
func (c *Coordinator) stageTimeout(a *attempt, limit time.Duration) time.Duration {
	return max(min(limit, a.req.DeadlineAt.Sub(c.now())), reclaimTimeout)
}

// attempt is a live attempt as its driver sees it.
type attempt struct {
	req            Request
	attemptID      string
	workerID       string
	epoch          string
	url            string
	slotGeneration int64
	state          string
}

func (c *Coordinator) startDriver(ctx context.Context, attemptID string, res *reservation, fresh bool) {
	c.mu.Lock()
	if c.driving[attemptID] {
		c.mu.Unlock()
		return
	}
	c.driving[attemptID] = true
	c.mu.Unlock()
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer func() {
			c.mu.Lock()
			delete(c.driving, attemptID)
			c.mu.Unlock()
		}()
		a := &attempt{req: res.req, attemptID: attemptID, workerID: res.workerID, epoch: res.epoch, url: res.url,
			slotGeneration: res.slotGeneration, state: "reserved"}
		ctx, span := c.traceAttempt(ctx, a)
		defer endAttemptSpan(span, a)
		if fresh {
			if !c.permitted(ctx, a) {
				return
			}
			ok, err := c.markDispatched(ctx, attemptID)
			if err != nil || !ok {
				// Not ours to send any more (the reconciler released it): nothing was sent.
				return
			}
			c.send(ctx, a)
			return
		}
		c.query(ctx, a)
	}()
}

// permitted rechecks the owner's permission of a reserved attempt's request (Permitted). When
// it is gone the cancel is persisted first and the reserved attempt released without counting:
// nothing was sent.
func (c *Coordinator) permitted(ctx context.Context, a *attempt) bool {
	if c.Permitted == nil {
		return true
	}
	var owner string
	if err := c.db.Q(ctx).QueryRow(ctx, `SELECT owner FROM render_requests WHERE workspace_id = $1 AND id = $2`,
		a.req.WorkspaceID, a.req.ID).Scan(&owner); err != nil {
		return true
	}
	ok, err := c.Permitted(ctx, a.req.WorkspaceID, owner)
	if err != nil || ok {
		return true
	}
	if _, err := c.db.Exec(ctx, `UPDATE render_requests SET cancel_version = cancel_version + 1, updated_at = $3
		WHERE workspace_id = $1 AND id = $2`, a.req.WorkspaceID, a.req.ID, c.now().UTC()); err != nil {
		return true
	}
	c.finish(ctx, a, rc.NewError(rc.CodeCancelled, rc.StageAdmission, "the owner may no longer render in this workspace"), false)
	return false
}

// send posts the execution request with its admission ticket and preview access.
func (c *Coordinator) send(ctx context.Context, a *attempt) {
	now := c.now().UTC()
	remaining := a.req.DeadlineAt.Sub(now)
	if remaining <= 0 {
		c.finish(ctx, a, rc.NewError(rc.CodeDeadlineExceeded, rc.StageAdmission, "deadline passed before dispatch"), false)
		return
	}
	req := rc.ExecutionRequest{ContractVersion: rc.ContractVersion, Operation: a.req.Operation, RequestID: a.req.ID,
		AttemptID: a.attemptID, WorkspaceID: a.req.WorkspaceID, TraceID: executionTraceID(ctx, a), SnapshotRef: a.req.SnapshotRef,
		InputDigest: a.req.InputDigest, RenderProfileDigest: a.req.ProfileDigest, Viewport: a.req.Viewport,
		OperationOptions: a.req.Options, DeadlineAt: a.req.DeadlineAt, RemainingBudgetMS: max(1, remaining.Milliseconds())}
	var err error
	if req.RequestDigest, err = req.ComputeRequestDigest(); err != nil {
		c.finish(ctx, a, rc.NewError(rc.CodeInternal, rc.StageAdmission, "request digest"), false)
		return
	}
	acceptBy := now.Add(min(10*time.Second, remaining))
	req.AdmissionTicket, err = c.cfg.Signer.Sign(&ticket.Admission{RequestID: a.req.ID, AttemptID: a.attemptID,
		RequestDigest: req.RequestDigest, WorkspaceID: a.req.WorkspaceID, WorkerID: a.workerID, Epoch: a.epoch,
		SlotGeneration: a.slotGeneration, IssuedAt: now, AcceptBy: acceptBy, StopBy: a.req.DeadlineAt})
	if err == nil {
		req.PreviewAccess, err = c.PreviewAccess(a.req.WorkspaceID, a.req.SnapshotRef, a.req.DeadlineAt)
	}
	if err != nil {
		c.finish(ctx, a, rc.NewError(rc.CodeInternal, rc.StageAdmission, "signing the ticket failed"), false)
		return
	}
	pctx, cancel := context.WithTimeout(ctx, c.stageTimeout(a, 10*time.Second))
	rec, ans, err := c.client.post(pctx, a.url, &req)
	cancel()
	switch {
	case err != nil:
		// Lost response: ask the same worker/epoch before anything else.
		c.query(ctx, a)
	case ans.err == nil:
		if rec.AttemptID != a.attemptID || rec.WorkerID != a.workerID || rec.Epoch != a.epoch || rec.SlotGeneration != a.slotGeneration {
			c.quarantine(ctx, a.workerID, a.epoch, "receipt identity differs from the dispatch")
			c.markUnknown(ctx, a)
			return
		}
		c.poll(ctx, a, rec)
	default:
		c.refused(ctx, a, ans.err)
	}
}

// PreviewAccess signs the artifact-scoped preview access a renderer's browser needs for one
// snapshot document at the navigation base.
func (c *Coordinator) PreviewAccess(ws, ref string, until time.Time) (rc.PreviewAccess, error) {
	nav := c.cfg.NavigationBase
	if nav == nil {
		return rc.PreviewAccess{}, errors.New("render: no RENDER_RUNTIME_NAVIGATION_BASE_URL")
	}
	now := c.now().UTC()
	tok, err := c.cfg.Signer.Sign(&ticket.PreviewAccess{WorkspaceID: ws, SnapshotRef: ref,
		Origin: nav.Scheme + "://" + nav.Host, Path: rc.PreviewPath(nav.Path, ref), IssuedAt: now, ExpiresAt: until})
	return rc.PreviewAccess{Token: tok, ExpiresAt: until}, err
}

// refused handles an explicit answer to the POST that is not a receipt.
func (c *Coordinator) refused(ctx context.Context, a *attempt, e *rc.Error) {
	switch e.Code {
	case rc.CodeWorkerBusy, rc.CodeServiceUnavailable, rc.CodeUnauthenticated:
		// Explicitly not taken over: the attempt gives its budget back. A node condition (a
		// restart inside the registry's lag, clock skew, a fenced slot) keeps the worker out of
		// dispatch until the registry's next look at it.
		switch e.Code {
		case rc.CodeUnauthenticated:
			c.setWorkerState(ctx, a.workerID, a.epoch, "unready", "service credential refused")
		case rc.CodeServiceUnavailable:
			c.setWorkerState(ctx, a.workerID, a.epoch, "unready", "refused admission: "+clip(e.Message, 200))
		}
		c.finish(ctx, a, e, false)
	case rc.CodeProfileMismatch:
		c.setWorkerState(ctx, a.workerID, a.epoch, "mismatch", "environment digest differs from the release's profile")
		c.finish(ctx, a, e, false)
	case rc.CodeContractMismatch:
		c.quarantine(ctx, a.workerID, a.epoch, "contract mismatch at admission: "+clip(e.Message, 200))
		c.finish(ctx, a, e, false)
	default:
		c.finish(ctx, a, e, true)
	}
}

// query asks the attempt's own worker/epoch what became of it (lost response, takeover).
func (c *Coordinator) query(ctx context.Context, a *attempt) {
	qctx, cancel := context.WithTimeout(ctx, c.stageTimeout(a, 5*time.Second))
	rec, ans, err := c.client.get(qctx, a.url, a.attemptID)
	cancel()
	switch {
	case err != nil:
		c.markUnknown(ctx, a)
	case ans.err == nil:
		c.poll(ctx, a, rec)
	case ans.status == 404:
		c.notKnown(ctx, a)
	case ans.status == 410:
		c.finish(ctx, a, rc.NewError(rc.CodeResultLost, rc.StageRetrieval, "the result was reclaimed before it was consumed"), true)
	default:
		c.markUnknown(ctx, a)
	}
}

// notKnown handles a worker that does not know the attempt: on a new epoch the old process
// groups are proven gone; on the same epoch a cancel mark makes sure a late POST never starts.
func (c *Coordinator) notKnown(ctx context.Context, a *attempt) {
	qctx, cancel := context.WithTimeout(ctx, c.stageTimeout(a, 5*time.Second))
	defer cancel()
	caps, ans, err := c.client.capabilities(qctx, a.url)
	if err != nil || ans.err != nil {
		c.markUnknown(ctx, a)
		return
	}
	if caps.Epoch != a.epoch {
		if !c.epochProven(ctx, a.workerID, a.epoch, caps) {
			// Reappeared on another host or cgroup: its old processes are not proven gone.
			c.markUnknown(ctx, a)
			return
		}
		c.finish(ctx, a, rc.NewError(rc.CodeBrowserLost, rc.StageAdmission, "the worker restarted on the same host and cgroup; its earlier epoch's processes were killed at start"), true)
		return
	}
	if ans, err := c.client.cancel(qctx, a.url, a.attemptID, a.req.CancelVersion+1); err != nil || (ans.err != nil && ans.status != 404) {
		c.markUnknown(ctx, a)
		return
	}
	rec, ans, err := c.client.get(qctx, a.url, a.attemptID)
	if err == nil && ans.err == nil {
		c.poll(ctx, a, rec)
		return
	}
	c.finish(ctx, a, rc.NewError(rc.CodeResultLost, rc.StageAdmission, "the worker never took the attempt over"), true)
}

// maxPollInterval caps how far a driver's receipt polls grow apart when the renderer does not
// hold them (a renderer that predates the receipt long-poll, or one that answered an error): a
// receipt read is one small GET on the renderer; at 50 ms a finished attempt waits ~25 ms on
// average for its driver to notice, for at most 20 reads a second per attempt in flight.
const maxPollInterval = 50 * time.Millisecond

// receiptWait is how long one receipt query waits on the renderer for the attempt to leave the
// state its driver last saw (the receipt long-poll, rc.QueryReceiptState), so a finished
// attempt is noticed when the renderer publishes it rather than up to a poll interval later
// (issue #24). It bounds one turn of the poll loop: the lease renewal (due every Lease/3; the
// wait never exceeds that either) and the check for a cancel or deadline another replica
// recorded (every 250 ms) run at most this late. stageTimeout's floor (reclaimTimeout, 2 s)
// keeps the query's own timeout well above it.
const receiptWait = 250 * time.Millisecond

// poll follows the receipt until it is terminal, renewing the lease, forwarding cancellation
// and deadline. Each receipt query is a long-poll on the last state seen; an answer in the same
// state that came sooner than the current interval (a renderer that ignores the long-poll, an
// error) is followed by the rest of the interval, so such a renderer is read at the pace of
// PollInterval growing to maxPollInterval, never in a tight loop.
func (c *Coordinator) poll(ctx context.Context, a *attempt, rec rc.Receipt) {
	interval := c.PollInterval
	lastRenew, lastCheck := time.Now(), time.Now()
	cancelSent := int64(0)
	failures := 0
	for {
		if st := attemptState(rec.State); st != a.state {
			c.setAttemptState(ctx, a, st)
		}
		if rec.Terminal() {
			c.terminal(ctx, a, rec)
			return
		}
		if ctx.Err() != nil {
			return // shutting down: the lease ends and another coordinator takes over
		}
		if time.Since(lastRenew) > c.Lease/3 {
			if !c.renew(ctx, a) {
				return // another coordinator drives it now
			}
			lastRenew = time.Now()
		}
		if time.Since(lastCheck) > 250*time.Millisecond {
			lastCheck = time.Now()
			cur, err := c.get(ctx, a.req.WorkspaceID, a.req.ID)
			if err == nil && (cur.CancelVersion > a.req.CancelVersion || !c.now().Before(cur.DeadlineAt)) && cancelSent < max(cur.CancelVersion, 1) {
				cctx, cancel := context.WithTimeout(ctx, c.stageTimeout(a, 5*time.Second))
				_, _ = c.client.cancel(cctx, a.url, a.attemptID, max(cur.CancelVersion, 1))
				cancel()
				cancelSent = max(cur.CancelVersion, 1)
			}
		}
		asked := time.Now()
		qctx, cancel := context.WithTimeout(ctx, c.stageTimeout(a, 5*time.Second))
		next, ans, err := c.client.await(qctx, a.url, a.attemptID, rec.State, min(receiptWait, c.Lease/3))
		cancel()
		switch {
		case err != nil:
			failures++
			if failures >= 5 {
				c.markUnknown(ctx, a)
				return
			}
		case ans.status == 404:
			c.notKnown(ctx, a)
			return
		case ans.err != nil:
			failures++
			if failures >= 5 {
				c.markUnknown(ctx, a)
				return
			}
		default:
			failures = 0
			moved := next.State != rec.State
			rec = next
			if moved {
				continue
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(interval - time.Since(asked)):
		}
		interval = min(interval*3/2, maxPollInterval)
	}
}

func attemptState(s rc.AttemptState) string {
	if s.Valid() {
		return string(s)
	}
	return "dispatched"
}

// terminal handles a terminal receipt.
func (c *Coordinator) terminal(ctx context.Context, a *attempt, rec rc.Receipt) {
	if rec.ResourceState != rc.ResourceReleased && rec.ResourceState != rc.ResourceNone {
		// A terminal receipt without released resources breaks the contract; the slot stays
		// occupied until the node is proven clean.
		c.quarantine(ctx, a.workerID, a.epoch, "terminal receipt without released resources")
		c.markUnknown(ctx, a)
		return
	}
	if rec.Outcome != rc.OutcomeSucceeded {
		e := rec.Error
		if e == nil {
			e = rc.NewError(rc.CodeInternal, rc.StageResult, "attempt ended %s without an error", rec.Outcome)
		}
		if e.Code == rc.CodeContractMismatch && !hostFault(e) {
			c.quarantine(ctx, a.workerID, a.epoch, "contract mismatch: "+clip(e.Message, 200))
		}
		c.finish(ctx, a, e, rec.Outcome != rc.OutcomeRejected)
		return
	}
	res, e := c.fetch(ctx, a, rec)
	if e != nil {
		if e.Code == rc.CodeProfileMismatch {
			c.setWorkerState(ctx, a.workerID, a.epoch, "mismatch", "result environment digest differs")
		}
		c.finish(ctx, a, e, true)
		return
	}
	c.commit(ctx, a, res)
}

// fetch verifies a successful result item by item, reads its artifact and stores it.
func (c *Coordinator) fetch(ctx context.Context, a *attempt, rec rc.Receipt) (*Result, *rc.Error) {
	r := rec.Result
	if r == nil || r.Operation != a.req.Operation {
		return nil, rc.NewError(rc.CodeResultLost, rc.StageResult, "successful receipt without a result of the operation")
	}
	if r.InputDigest != a.req.InputDigest {
		return nil, rc.NewError(rc.CodeProfileMismatch, rc.StageResult, "result input digest differs from the request's")
	}
	if r.RenderProfileDigest != a.req.ProfileDigest || r.RenderDigest != a.req.RenderDigest {
		return nil, rc.NewError(rc.CodeProfileMismatch, rc.StageResult, "result profile or render digest differs from the request's")
	}
	name := rc.ArtifactFor(a.req.Operation)
	var desc *rc.Artifact
	for i := range r.Artifacts {
		if r.Artifacts[i].Name == name {
			desc = &r.Artifacts[i]
		}
	}
	if desc == nil {
		return nil, rc.NewError(rc.CodeResultLost, rc.StageResult, "result lacks its %s", name)
	}
	// The result is worth fetching only within the budget: a late one is never committed.
	left := a.req.DeadlineAt.Sub(c.now())
	if left <= 0 {
		return nil, rc.NewError(rc.CodeDeadlineExceeded, rc.StageRetrieval, "deadline passed before the result was fetched")
	}
	fctx, cancel := context.WithTimeout(ctx, min(30*time.Second, left))
	defer cancel()
	data, e := c.client.artifact(fctx, a.url, a.attemptID, *desc)
	if e != nil {
		return nil, e
	}
	hex := strings.TrimPrefix(desc.SHA256, "sha256:")
	out := &Result{AttemptID: a.attemptID, ArtifactSHA256: "sha256:" + hex, Bytes: desc.Bytes, HostBuild: r.HostBuild}
	if name == rc.ArtifactCapture {
		cfg, err := png.DecodeConfig(bytes.NewReader(data))
		w, h := a.req.Viewport.PhysicalSize()
		if err != nil || cfg.Width != w || cfg.Height != h || desc.Width != w || desc.Height != h {
			return nil, rc.NewError(rc.CodeResultLost, rc.StageRetrieval, "capture is not a PNG of the canvas's physical size")
		}
		out.Width, out.Height = w, h
		out.ArtifactKey = "ws/" + a.req.WorkspaceID + "/renders/" + a.req.ID + "/" + a.attemptID + "/" + hex + ".png"
		if ok, err := c.bucket.Exists(fctx, out.ArtifactKey); err != nil {
			return nil, rc.NewError(rc.CodeResultLost, rc.StageRetrieval, "result store unavailable")
		} else if !ok {
			if err := c.bucket.WriteAll(fctx, out.ArtifactKey, data, &gcblob.WriterOptions{ContentType: "image/png"}); err != nil {
				return nil, rc.NewError(rc.CodeResultLost, rc.StageRetrieval, "result could not be stored")
			}
		}
		return out, nil
	}
	var d rc.Diagnosis
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&d); err != nil || d.SchemaVersion != rc.DiagnosisSchemaVersion || d.Operation != a.req.Operation {
		return nil, rc.NewError(rc.CodeContractMismatch, rc.StageRetrieval, "diagnosis is not %s", rc.DiagnosisSchemaVersion)
	}
	out.Diagnosis = &d
	return out, nil
}

// commit stores the result, the terminal state and the slot release in one transaction, then
// confirms consumption to the renderer (a lost confirmation only keeps the artifact until its
// retention ends; rendering is never redone).
func (c *Coordinator) commit(ctx context.Context, a *attempt, res *Result) {
	var diag []byte
	if res.Diagnosis != nil {
		diag, _ = json.Marshal(res.Diagnosis)
	}
	var late *rc.Error
	err := c.db.Tx(ctx, func(tx pgx.Tx) error {
		late = nil
		now := c.now().UTC()
		cur, err := scanRequest(tx.QueryRow(ctx, `SELECT `+requestCols+` FROM render_requests WHERE workspace_id = $1 AND id = $2 FOR UPDATE`,
			a.req.WorkspaceID, a.req.ID))
		if err != nil {
			return err
		}
		switch {
		case cur.State != StateExecuting:
			late = rc.NewError(rc.CodeCancelled, rc.StageResult, "request ended before the result was committed")
		case cur.CancelVersion > a.req.CancelVersion:
			late = rc.NewError(rc.CodeCancelled, rc.StageResult, "cancelled before the result was committed")
		case !now.Before(cur.DeadlineAt):
			late = rc.NewError(rc.CodeDeadlineExceeded, rc.StageResult, "deadline passed before the result was committed")
		}
		if late != nil {
			return nil
		}
		if _, err := tx.Exec(ctx, `INSERT INTO render_results (workspace_id, request_id, attempt_id, operation, input_digest,
			render_digest, profile_digest, host_build, artifact_key, artifact_sha256, artifact_bytes, width, height, diagnosis, created_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)`,
			a.req.WorkspaceID, a.req.ID, a.attemptID, string(a.req.Operation), a.req.InputDigest, a.req.RenderDigest,
			a.req.ProfileDigest, res.HostBuild, res.ArtifactKey, res.ArtifactSHA256, res.Bytes, res.Width, res.Height, diag, now); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE render_requests SET state = 'succeeded', finished_at = $3, updated_at = $3
			WHERE workspace_id = $1 AND id = $2`, a.req.WorkspaceID, a.req.ID, now); err != nil {
			return err
		}
		released, err := releaseAttempt(ctx, tx, a.attemptID, "succeeded", nil, now)
		if err == nil && !released {
			// Released meanwhile by someone else (an operator's release of an unknown attempt):
			// its request has moved on; this result is not committed.
			err = errAlreadyReleased
		}
		return err
	})
	if err != nil {
		c.log.Warn("render result commit failed; the attempt stays with its driver", zap.String("request_id", a.req.ID), logging.Trace(ctx), zapErr(err))
		c.markUnknown(ctx, a)
		return
	}
	if late != nil {
		c.finish(ctx, a, late, true)
		return
	}
	c.observe("succeeded", a.req.Operation, c.now().Sub(a.req.EnqueuedAt))
	c.notify(a.req.ID)
	c.Kick()
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := c.client.consume(cctx, a.url, a.attemptID); err != nil {
		c.log.Info("result consumption not confirmed; the renderer reclaims it after its retention", zap.String("attempt_id", a.attemptID))
	}
}

// errAlreadyReleased: the attempt was released by someone else meanwhile.
var errAlreadyReleased = errors.New("render attempt already released")

// releaseAttempt releases an unreleased attempt; false means it was released already (by
// another driver's finish or an operator's release), and the caller must leave its request alone.
func releaseAttempt(ctx context.Context, tx pgx.Tx, attemptID, outcome string, e *rc.Error, now time.Time) (bool, error) {
	code, stage, msg := "", "", ""
	if e != nil {
		code, stage, msg = string(e.Code), string(e.Stage), clip(e.Message, 500)
	}
	tag, err := tx.Exec(ctx, `UPDATE render_attempts SET state = 'terminal', released = true, outcome = $2,
		finished_at = COALESCE(finished_at, $3), released_at = $3, error_code = $4, error_stage = $5, error_message = $6
		WHERE attempt_id = $1 AND released = false`, attemptID, outcome, now, code, stage, msg)
	return err == nil && tag.RowsAffected() == 1, err
}

// hostFault reports whether a renderer's error blames the preview host, not the renderer: a
// protocol fault met while opening the preview document or reading its render-ready.v1 state
// (a broken host build, a document without the readiness protocol, a redirect off the allowed
// origins). It never quarantines the renderer that met it — every renderer would meet it — and
// another attempt would meet it again.
func hostFault(e *rc.Error) bool {
	return e.Code == rc.CodeContractMismatch && (e.Stage == rc.StageNavigation || e.Stage == rc.StageReadiness)
}

// retryable decides by category whether another attempt may help.
func retryable(e *rc.Error) bool {
	if hostFault(e) {
		return false
	}
	switch e.Code.Category() {
	case rc.CategoryInfrastructure, rc.CategoryInternal, rc.CategoryCapacity:
		return true
	case rc.CategoryConfiguration:
		// A mismatching or quarantined node is out of the pool now; another node may match.
		return e.Code == rc.CodeContractMismatch || e.Code == rc.CodeProfileMismatch || e.Code == rc.CodeUnauthenticated
	case rc.CategoryResource:
		return e.Code == rc.CodeAssetNotReady && e.Retryable
	}
	return false
}

// finish releases the attempt and decides the request's next state in one transaction.
// counted says whether the attempt counts against the budget (it possibly ran).
func (c *Coordinator) finish(ctx context.Context, a *attempt, e *rc.Error, counted bool) {
	outcome := "failed"
	if !counted {
		outcome = "rejected"
	}
	err := c.db.Tx(ctx, func(tx pgx.Tx) error {
		now := c.now().UTC()
		cur, err := scanRequest(tx.QueryRow(ctx, `SELECT `+requestCols+` FROM render_requests WHERE workspace_id = $1 AND id = $2 FOR UPDATE`,
			a.req.WorkspaceID, a.req.ID))
		if err != nil {
			return err
		}
		released, err := releaseAttempt(ctx, tx, a.attemptID, outcome, e, now)
		if err != nil {
			return err
		}
		if !released || cur.State != StateExecuting {
			// Released already (the request may run another attempt now), or the request ended.
			return nil
		}
		used := cur.AttemptsUsed
		if !counted {
			used--
		}
		next, code := StateFailed, e
		pause := backoff(used)
		if !counted && (e.Code == rc.CodeWorkerBusy || e.Code == rc.CodeServiceUnavailable) {
			pause = 50 * time.Millisecond
		}
		switch {
		case cur.CancelVersion > 0:
			// A business cancel (persisted before the renderer was told) decides first.
			next, code = StateCancelled, rc.NewError(rc.CodeCancelled, e.Stage, "the render was cancelled")
		case e.Code == rc.CodeDeadlineExceeded || e.Code == rc.CodeCancelled || !now.Before(cur.DeadlineAt):
			// Without a business cancel, a stop the coordinator asked for is the deadline's: the
			// request expires (RENDER_DEADLINE_EXCEEDED), never "cancelled".
			next, code = StateExpired, rc.NewError(rc.CodeDeadlineExceeded, e.Stage, "the render stage's budget ran out")
		case retryable(e) && used < cur.MaxAttempts && now.Add(pause).Before(cur.DeadlineAt):
			next = StateRetryWait
		case retryable(e) && used >= cur.MaxAttempts:
			code = &rc.Error{Code: e.Code, Category: e.Category, Stage: e.Stage, Message: "attempt budget used up: " + e.Message}
		}
		finished := any(now)
		if next == StateRetryWait {
			finished = nil
		}
		_, err = tx.Exec(ctx, `UPDATE render_requests SET state = $3, attempts_used = $4, not_before = $5, updated_at = $6,
			finished_at = $7, error_code = $8, error_stage = $9, error_message = $10
			WHERE workspace_id = $1 AND id = $2`, a.req.WorkspaceID, a.req.ID, next, used, now.Add(pause), now, finished,
			string(code.Code), string(code.Stage), clip(code.Message, 500))
		return err
	})
	if err != nil {
		c.log.Warn("render attempt could not be finished; the reconciler retries", zap.String("attempt_id", a.attemptID), logging.Trace(ctx), zapErr(err))
		return
	}
	c.notify(a.req.ID)
	c.Kick()
}

func (c *Coordinator) setAttemptState(ctx context.Context, a *attempt, st string) {
	if st == "terminal" {
		return // only finish/commit release
	}
	_, err := c.db.Exec(ctx, `UPDATE render_attempts SET state = $2, accepted_at = COALESCE(accepted_at, $3)
		WHERE attempt_id = $1 AND released = false`, a.attemptID, st, c.now().UTC())
	if err == nil {
		a.state = st
	}
}

// renew extends the driver's lease; false means another coordinator took the attempt over.
func (c *Coordinator) renew(ctx context.Context, a *attempt) bool {
	tag, err := c.db.Exec(ctx, `UPDATE render_attempts SET driver_until = $3 WHERE attempt_id = $1 AND driver = $2 AND released = false`,
		a.attemptID, c.id, c.now().UTC().Add(c.Lease))
	return err != nil || tag.RowsAffected() == 1
}

// markUnknown leaves the attempt holding its capacity for the reconciler, which asks again
// after a short pause.
func (c *Coordinator) markUnknown(ctx context.Context, a *attempt) {
	_, err := c.db.Exec(ctx, `UPDATE render_attempts SET state = 'unknown', driver_until = $2 WHERE attempt_id = $1 AND released = false`,
		a.attemptID, c.now().UTC().Add(2*time.Second))
	if err != nil {
		c.log.Warn("render attempt could not be marked unknown", zap.String("attempt_id", a.attemptID), logging.Trace(ctx), zapErr(err))
	}
}

func (c *Coordinator) setWorkerState(ctx context.Context, workerID, epoch, state, detail string) {
	_, _ = c.db.Exec(ctx, `UPDATE render_workers SET state = $3, detail = $4 WHERE worker_id = $1 AND epoch = $2 AND state NOT IN ('quarantined', 'retired')`,
		workerID, epoch, state, clip(detail, 300))
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
