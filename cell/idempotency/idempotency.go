// Package idempotency runs requests that carry an Idempotency-Key exactly once and replays their
// first answer.
//
// Rules (spec, "Idempotency rules"): the boundary is user + workspace + operation + key; the
// fingerprint is method + path with query + Content-Type + If-Match + canonical body; the same
// key and fingerprint replay the first answer byte for byte; the same key with another
// fingerprint is a 409; the same key while the first request still executes is a 409 with
// Retry-After and a retryable marker. Answers are kept for Retention and then purged.
//
// Exactly once rests on one fact: the stored answer (a row of idempotency_keys, unique per key)
// is inserted in the same transaction as the request's business writes (Stripe's "atomic
// phases"). Either both commit or neither does, so there is no moment where a write exists
// without its answer, and a second execution of the same key can never commit: its answer
// insert would violate the key. Run gives the request a context carrying that transaction
// (shared/db.Atomic); every store write made with it joins the transaction.
//
// Claims (idempotency_claims) are bookkeeping beside that: a claim under a lease turns a
// concurrent duplicate into "in flight" instead of wasted work, and a claim whose lease ended
// (its process died) is taken over. Claims and lookups run at READ COMMITTED, so keys never make
// unrelated requests abort each other at SERIALIZABLE.
package idempotency

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"

	"slidecells/shared/db"
	"slidecells/shared/ids"
	"slidecells/shared/problem"
)

// Defaults.
const (
	DefaultLease     = 2 * time.Minute
	DefaultRetention = 24 * time.Hour
	MaxKeyLength     = 255
)

// Key is the boundary of one idempotency record.
type Key struct {
	WorkspaceID string
	UserID      string
	OperationID string
	Key         string
}

// Response is an answer.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// Outcomes reported to Store.Observe.
const (
	Executed  = "executed"   // ran, answer stored with its writes
	NotStored = "not_stored" // ran, answer not kept (server error or 421): writes rolled back
	Replayed  = "replayed"   // an earlier answer was replayed
	Reused    = "conflict"   // the key was used for a different request
	InFlight  = "in_flight"  // the key is executing elsewhere
	TakenOver = "taken_over" // a claim whose lease had ended was taken over
	Raced     = "raced"      // another execution's answer committed first; replayed it
)

// Failpoints are named moments of Run where Store.Failpoint is consulted, for fault tests.
const (
	// BeforeCommit: inside the transaction, after the answer is written; an error rolls it all back.
	BeforeCommit = "idempotency.before-commit"
	// AfterCommit: after the commit, before the answer is returned; an error stands for a lost
	// response (the client sees a server error; its retry must replay).
	AfterCommit = "idempotency.after-commit"
)

// Store keeps records in the cell database.
type Store struct {
	DB *db.DB
	// Lease is how long a claim blocks its key, and the longest an execution may run.
	Lease time.Duration
	// Retention is how long an answer is replayed.
	Retention time.Duration
	// Now is the clock; nil is time.Now.
	Now func() time.Time
	// Observe, when set, is told the outcome of each Run (one of the outcome constants).
	Observe func(ctx context.Context, outcome string)
	// Failpoint, when set, is called at each failpoint; a non-nil error fails that step.
	Failpoint func(name string) error
}

func (s *Store) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func (s *Store) lease() time.Duration {
	if s.Lease > 0 {
		return s.Lease
	}
	return DefaultLease
}

func (s *Store) retention() time.Duration {
	if s.Retention > 0 {
		return s.Retention
	}
	return DefaultRetention
}

func (s *Store) observe(ctx context.Context, outcome string) {
	if s.Observe != nil {
		s.Observe(ctx, outcome)
	}
}

func (s *Store) failpoint(name string) error {
	if s.Failpoint != nil {
		return s.Failpoint(name)
	}
	return nil
}

// ValidKey checks the shape of a client key: 1–255 printable ASCII characters.
func ValidKey(k string) bool {
	if len(k) == 0 || len(k) > MaxKeyLength {
		return false
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x21 || k[i] > 0x7e {
			return false
		}
	}
	return true
}

// Fingerprint hashes method, path (with query), the headers that change a request's meaning
// (Content-Type, If-Match) and the canonical form of a body held in memory: JSON bodies are
// re-encoded with sorted keys and no insignificant space, others are taken as sent.
func Fingerprint(method, path string, header http.Header, body []byte) []byte {
	d := sha256.Sum256(canonical(body))
	return FingerprintDigest(method, path, header, d[:])
}

// FingerprintDigest is Fingerprint for a body too large to hold, given the SHA-256 of its bytes
// as sent (large bodies are binary, so there is nothing to canonicalise).
func FingerprintDigest(method, path string, header http.Header, bodyDigest []byte) []byte {
	h := sha256.New()
	for _, part := range []string{method, path, header.Get("Content-Type"), header.Get("If-Match")} {
		h.Write([]byte(part))
		h.Write([]byte{0})
	}
	h.Write(bodyDigest)
	return h.Sum(nil)
}

func canonical(body []byte) []byte {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 || (trimmed[0] != '{' && trimmed[0] != '[') {
		return body
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil || dec.More() {
		return body
	}
	out, err := json.Marshal(v) // maps marshal with sorted keys
	if err != nil {
		return body
	}
	return out
}

func inFlight() error {
	e := problem.New(problem.IdempotencyInFlight, "a request with this Idempotency-Key is still executing; retry after it finishes")
	e.RetryAfter, e.Retryable = 1, true
	return e
}

func reused() error {
	return problem.New(problem.IdempotencyConflict, "this Idempotency-Key was used for a different request")
}

// Storable reports whether an answer is kept for replay. Server errors are not answers to the
// request, and a 421 belongs to the router's placement: both roll their writes back and leave
// the key free, so the retry (here or on the owning cell) runs.
func Storable(status int) bool {
	return status < 500 && status != http.StatusMisdirectedRequest
}

// Exec executes a request and returns its answer. Its context carries the transaction that the
// answer will be stored in; database writes made with it join that transaction. It may be called
// more than once (a serialization failure restarts the transaction), and only the last call's
// writes and answer count.
type Exec func(ctx context.Context) Response

var (
	errNotStored = errors.New("idempotency: answer not stored")
	errRaced     = errors.New("idempotency: another execution's answer committed first")
	errClaimGone = errors.New("idempotency: the claim went away")
)

// maxRounds bounds Run's lookup → claim → execute rounds (a round restarts only when another
// execution of the same key finished in between).
const maxRounds = 3

// Run answers a request that carries key k and fingerprint fp: it replays the stored answer, or
// reports a conflict (another request, or the same one still in flight), or runs exec once and
// stores its answer together with its writes. replayed tells which. The execution is detached
// from the caller's cancellation (a client that goes away does not undo or interrupt a write;
// its retry replays) and bounded by the lease.
func (s *Store) Run(ctx context.Context, k Key, fp []byte, exec Exec) (resp Response, replayed bool, err error) {
	for range maxRounds {
		ans, expired, err := s.lookup(ctx, k)
		if err != nil {
			return Response{}, false, problem.Wrap(err, "idempotency record unavailable")
		}
		if ans != nil {
			if !bytes.Equal(ans.fingerprint, fp) {
				s.observe(ctx, Reused)
				return Response{}, false, reused()
			}
			s.observe(ctx, Replayed)
			return ans.Response, true, nil
		}
		attempt, err := s.claim(ctx, k, fp)
		if errors.Is(err, errClaimGone) {
			continue
		}
		if err != nil {
			return Response{}, false, err
		}
		resp, err := s.execute(ctx, k, fp, attempt, expired, exec)
		if errors.Is(err, errRaced) {
			s.observe(ctx, Raced)
			continue
		}
		return resp, false, err
	}
	s.observe(ctx, InFlight)
	return Response{}, false, inFlight()
}

type answer struct {
	Response
	fingerprint []byte
}

// lookup reads the stored answer of k. An answer past its retention counts as absent (expired
// is then true: the new answer replaces it).
func (s *Store) lookup(ctx context.Context, k Key) (*answer, bool, error) {
	var (
		a         answer
		headers   []byte
		expiresAt time.Time
		found     bool
	)
	err := s.DB.ReadCommitted(ctx, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, `
			SELECT fingerprint, status, headers, body, expires_at FROM idempotency_keys
			WHERE workspace_id = $1 AND user_id = $2 AND operation_id = $3 AND idem_key = $4`,
			k.WorkspaceID, k.UserID, k.OperationID, k.Key).Scan(&a.fingerprint, &a.Status, &headers, &a.Body, &expiresAt)
		found = err == nil
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		return err
	})
	if err != nil || !found {
		return nil, false, err
	}
	if !expiresAt.After(s.now()) {
		return nil, true, nil
	}
	a.Header = http.Header{}
	if err := json.Unmarshal(headers, &a.Header); err != nil {
		return nil, false, err
	}
	return &a, false, nil
}

// claim records that this execution runs k, under a new attempt token.
func (s *Store) claim(ctx context.Context, k Key, fp []byte) (string, error) {
	attempt := ids.New("att")
	takenOver := false
	err := s.DB.ReadCommitted(ctx, func(tx pgx.Tx) error {
		takenOver = false
		now := s.now()
		tag, err := tx.Exec(ctx, `
			INSERT INTO idempotency_claims (workspace_id, user_id, operation_id, idem_key, fingerprint, attempt, lease_until, created_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (workspace_id, user_id, operation_id, idem_key) DO NOTHING`,
			k.WorkspaceID, k.UserID, k.OperationID, k.Key, fp, attempt, now.Add(s.lease()), now)
		if err != nil || tag.RowsAffected() == 1 {
			return err
		}
		var (
			claimedFP  []byte
			leaseUntil time.Time
		)
		err = tx.QueryRow(ctx, `
			SELECT fingerprint, lease_until FROM idempotency_claims
			WHERE workspace_id = $1 AND user_id = $2 AND operation_id = $3 AND idem_key = $4 FOR UPDATE`,
			k.WorkspaceID, k.UserID, k.OperationID, k.Key).Scan(&claimedFP, &leaseUntil)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return errClaimGone // released meanwhile: look again
		case err != nil:
			return err
		case !bytes.Equal(claimedFP, fp):
			return reused()
		case leaseUntil.After(now):
			return inFlight()
		}
		// The execution holding the claim outlived its lease (its process died). Taking over is
		// safe whatever became of it: had it committed, its answer would have been found; if it
		// still commits, our answer insert fails on the key and we replay its answer instead.
		takenOver = true
		_, err = tx.Exec(ctx, `
			UPDATE idempotency_claims SET attempt = $5, lease_until = $6, created_at = $7
			WHERE workspace_id = $1 AND user_id = $2 AND operation_id = $3 AND idem_key = $4`,
			k.WorkspaceID, k.UserID, k.OperationID, k.Key, attempt, now.Add(s.lease()), now)
		return err
	})
	var pe *problem.Error
	switch {
	case errors.As(err, &pe):
		if pe.Code == problem.IdempotencyInFlight {
			s.observe(ctx, InFlight)
		} else {
			s.observe(ctx, Reused)
		}
		return "", pe
	case errors.Is(err, errClaimGone):
		return "", err
	case err != nil:
		return "", problem.Wrap(err, "idempotency record unavailable")
	}
	if takenOver {
		s.observe(ctx, TakenOver)
	}
	return attempt, nil
}

// release drops this execution's claim so that a retry runs at once.
func (s *Store) release(ctx context.Context, k Key, attempt string) {
	_ = s.DB.ReadCommitted(context.WithoutCancel(ctx), func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `
			DELETE FROM idempotency_claims
			WHERE workspace_id = $1 AND user_id = $2 AND operation_id = $3 AND idem_key = $4 AND attempt = $5`,
			k.WorkspaceID, k.UserID, k.OperationID, k.Key, attempt)
		return err
	})
}

// volatileHeaders are not stored: they describe one transmission, not the answer.
var volatileHeaders = []string{"Date", "Content-Length"}

func (s *Store) execute(ctx context.Context, k Key, fp []byte, attempt string, expired bool, exec Exec) (Response, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.lease())
	defer cancel()
	defer func() {
		if r := recover(); r != nil {
			s.release(ctx, k, attempt) // the transaction rolled back; free the key for a retry
			panic(r)
		}
	}()
	var resp Response
	runs := 0
	err := s.DB.Atomic(ctx, func(ctx context.Context, tx pgx.Tx) error {
		runs++
		if runs > 1 {
			// A restart may be a concurrent execution's answer that committed first.
			var one int
			err := tx.QueryRow(ctx, `
				SELECT 1 FROM idempotency_keys
				WHERE workspace_id = $1 AND user_id = $2 AND operation_id = $3 AND idem_key = $4 AND expires_at > $5`,
				k.WorkspaceID, k.UserID, k.OperationID, k.Key, s.now()).Scan(&one)
			if err == nil {
				return errRaced
			}
			if !errors.Is(err, pgx.ErrNoRows) {
				return err
			}
		}
		resp = exec(ctx)
		if !Storable(resp.Status) {
			return errNotStored
		}
		stored := resp.Header.Clone()
		for _, h := range volatileHeaders {
			stored.Del(h)
		}
		headers, err := json.Marshal(stored)
		if err != nil {
			return err
		}
		now := s.now()
		if expired {
			if _, err := tx.Exec(ctx, `
				DELETE FROM idempotency_keys
				WHERE workspace_id = $1 AND user_id = $2 AND operation_id = $3 AND idem_key = $4 AND expires_at <= $5`,
				k.WorkspaceID, k.UserID, k.OperationID, k.Key, now); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, `
			INSERT INTO idempotency_keys (workspace_id, user_id, operation_id, idem_key, fingerprint, state, lease_until, status, headers, body, created_at, expires_at, attempt)
			VALUES ($1, $2, $3, $4, $5, 'done', $6, $7, $8, $9, $6, $10, $11)`,
			k.WorkspaceID, k.UserID, k.OperationID, k.Key, fp, now, resp.Status, headers, resp.Body, now.Add(s.retention()), attempt); err != nil {
			if db.IsUniqueViolation(err) {
				return errRaced
			}
			return err
		}
		if _, err := tx.Exec(ctx, `
			DELETE FROM idempotency_claims
			WHERE workspace_id = $1 AND user_id = $2 AND operation_id = $3 AND idem_key = $4 AND attempt = $5`,
			k.WorkspaceID, k.UserID, k.OperationID, k.Key, attempt); err != nil {
			return err
		}
		return s.failpoint(BeforeCommit)
	})
	switch {
	case err == nil:
		s.observe(ctx, Executed)
		if err := s.failpoint(AfterCommit); err != nil {
			return Response{}, problem.Wrap(err, "the answer was lost after commit")
		}
		return resp, nil
	case errors.Is(err, errNotStored):
		s.release(ctx, k, attempt)
		s.observe(ctx, NotStored)
		return resp, nil
	case errors.Is(err, errRaced):
		s.release(ctx, k, attempt)
		return Response{}, errRaced
	default:
		s.release(ctx, k, attempt)
		return Response{}, problem.Wrap(err, "the request could not be committed")
	}
}

// Purge deletes up to limit answers past their retention, and claims whose lease ended, and
// returns how many answers it deleted.
func (s *Store) Purge(ctx context.Context, limit int) (int, error) {
	var n int64
	err := s.DB.ReadCommitted(ctx, func(tx pgx.Tx) error {
		now := s.now()
		tag, err := tx.Exec(ctx, `
			DELETE FROM idempotency_keys WHERE (workspace_id, user_id, operation_id, idem_key) IN (
				SELECT workspace_id, user_id, operation_id, idem_key FROM idempotency_keys WHERE expires_at < $1 LIMIT $2)`, now, limit)
		if err != nil {
			return err
		}
		n = tag.RowsAffected()
		_, err = tx.Exec(ctx, `
			DELETE FROM idempotency_claims WHERE (workspace_id, user_id, operation_id, idem_key) IN (
				SELECT workspace_id, user_id, operation_id, idem_key FROM idempotency_claims WHERE lease_until < $1 LIMIT $2)`, now, limit)
		return err
	})
	return int(n), err
}
