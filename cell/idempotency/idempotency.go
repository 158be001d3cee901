// Package idempotency runs requests that carry an Idempotency-Key exactly once and replays their
// first answer.
//
// Rules (spec, "Idempotency rules"): the boundary is user + workspace + operation + key; the
// fingerprint is method + path with query + Content-Type + If-Match + canonical body; the same
// key and fingerprint replay the first answer byte for byte; the same key with another
// fingerprint is a 409; the same key while the first request still executes is a 409 with
// Retry-After and a retryable marker. Answers are kept for Retention and then purged.
//
// Exactly once rests on one transaction (Stripe's "atomic phases"): Run opens it, inserts the
// key's lock (idempotency_locks, unique per key) first, runs the request with a context that
// carries the transaction (shared/db.Atomic: every store read and write made with it joins),
// inserts the answer (idempotency_keys) last, and commits. The writes and their answer commit
// together or not at all, so:
//   - a retry at any later time finds the committed answer and replays it;
//   - a second execution of the same key cannot commit: its lock insert waits on the first
//     (briefly: InFlightWait in each of Run's rounds, then "in flight"), and finds the lock
//     taken once the first has committed;
//   - an execution that dies (process killed, connection lost) leaves nothing: its uncommitted
//     lock goes with its transaction, so there is no lease to wait out and nothing to take over.
//     A frozen client's transaction is ended by the server (db.Options.IdleInTransaction).
//
// Both are plain inserts, which take no predicate locks at SERIALIZABLE (a unique check is not a
// read), so distinct keys never make each other abort.
package idempotency

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"slidecells/shared/db"
	"slidecells/shared/problem"
)

// Defaults.
const (
	// DefaultTimeout bounds one execution (its transaction holds the key meanwhile).
	DefaultTimeout = 2 * time.Minute
	// DefaultInFlightWait is how long a duplicate waits for the first execution to finish
	// (and then gets its answer), in each of Run's rounds (up to three), before it is told
	// "in flight".
	DefaultInFlightWait = 100 * time.Millisecond
	DefaultRetention    = 24 * time.Hour
	MaxKeyLength        = 255
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
)

// Failpoints are named moments of Run where Store.Failpoint is consulted, for fault tests.
const (
	// BeforeCommit: inside the transaction, after the request ran and its answer was queued for
	// the commit; an error rolls it all back.
	BeforeCommit = "idempotency.before-commit"
	// AfterCommit: after the commit, before the answer is returned; an error stands for a lost
	// response (the client sees a server error; its retry must replay).
	AfterCommit = "idempotency.after-commit"
	// WaitTimedOut: a round's transaction was rolled back because a lock wait ran past
	// InFlightWait (lock_timeout), before the next round; its error is ignored.
	WaitTimedOut = "idempotency.wait-timed-out"
)

// Store keeps records in the cell database.
type Store struct {
	DB *db.DB
	// Timeout bounds one execution; zero is DefaultTimeout.
	Timeout time.Duration
	// InFlightWait is how long a duplicate waits on a running execution in each of Run's
	// rounds; zero is DefaultInFlightWait.
	InFlightWait time.Duration
	// Retention is how long an answer is replayed.
	Retention time.Duration
	// Now is the clock; nil is time.Now.
	Now func() time.Time
	// Observe, when set, is told the outcome of each Run (one of the outcome constants).
	Observe func(ctx context.Context, outcome string)
	// Failpoint, when set, is called at each failpoint; a non-nil error fails that step.
	Failpoint func(name string) error
	// Fence, when set, is checked for a workspace's key inside the transaction of every
	// execution, before the request runs (the cell sets tenancy.Writable): a workspace fenced for
	// a move takes no write and stores no answer, so nothing lands on a cell after the move has
	// copied it away. Its error (a *problem.Error) is the answer, not stored.
	Fence func(ctx context.Context, q db.Querier, workspaceID string) error
}

func (s *Store) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func (s *Store) timeout() time.Duration { return cmp.Or(s.Timeout, DefaultTimeout) }

func (s *Store) inFlightWait() time.Duration { return cmp.Or(s.InFlightWait, DefaultInFlightWait) }

func (s *Store) retention() time.Duration { return cmp.Or(s.Retention, DefaultRetention) }

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
	e := problem.New(problem.IdempotencyKeyInFlight, "a request with this Idempotency-Key is still executing; retry after it finishes")
	e.RetryAfter, e.Retryable = 1, true
	return e
}

func reused() error {
	return problem.New(problem.IdempotencyKeyReused, "this Idempotency-Key was used for a different request")
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
	errAnswered  = errors.New("idempotency: the key has an answer")
)

// maxRounds bounds Run's rounds; a round restarts when another execution of the same key
// committed between this one's failed write and the storing of its answer, or when the key's
// claim waited longer than InFlightWait (on the key's holder, or on a lock that is not the
// key's).
const maxRounds = 3

// Run answers a request that carries key k and fingerprint fp: it replays the stored answer, or
// reports a conflict (another request, or the same one still in flight), or runs exec once and
// stores its answer together with its writes. replayed tells which. The execution is detached
// from the caller's cancellation (a client that goes away does not undo or interrupt a write;
// its retry replays) and bounded by Timeout.
func (s *Store) Run(ctx context.Context, k Key, fp []byte, exec Exec) (resp Response, replayed bool, err error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.timeout())
	defer cancel()
	for range maxRounds {
		var stored *answer
		err := s.DB.Atomic(ctx, func(ctx context.Context, tx pgx.Tx) error {
			stored = nil
			if s.Fence != nil && k.WorkspaceID != "" {
				if err := s.Fence(ctx, tx, k.WorkspaceID); err != nil {
					return &fenced{err}
				}
			}
			claimed, err := s.claim(ctx, tx, k)
			if err != nil || !claimed {
				if err == nil {
					stored, err = s.read(ctx, tx, k)
				}
				if err == nil {
					err = errAnswered
				}
				return err
			}
			resp = exec(ctx)
			if !Storable(resp.Status) {
				return errNotStored
			}
			return s.complete(ctx, tx, k, fp, resp)
		})
		var rolledBack *db.RolledBack
		var refused *fenced
		if errors.As(err, &rolledBack) {
			switch {
			case !Storable(resp.Status):
				err = errNotStored
			case resp.Status < 300:
				// A handler that reports success although its write failed: not an answer.
				return Response{}, false, problem.Wrap(rolledBack.Err, "a write failed under a success answer")
			default:
				// The request's writes failed and were rolled back; its answer (a client error
				// such as a version conflict) is stored alone.
				err = s.DB.Tx(ctx, func(tx pgx.Tx) error {
					claimed, err := s.claim(ctx, tx, k)
					if err == nil && !claimed {
						err = errAnswered
					}
					if err == nil {
						err = s.complete(ctx, tx, k, fp, resp)
					}
					return err
				})
				if errors.Is(err, errAnswered) {
					continue // another execution committed meanwhile: replay it
				}
			}
		}
		switch {
		case err == nil:
			s.observe(ctx, Executed)
			if err := s.failpoint(AfterCommit); err != nil {
				return Response{}, false, problem.Wrap(err, "the answer was lost after commit")
			}
			return resp, false, nil
		case errors.Is(err, errNotStored):
			s.observe(ctx, NotStored)
			return resp, false, nil
		case errors.As(err, &refused):
			s.observe(ctx, NotStored)
			return Response{}, false, refused.err
		case errors.Is(err, errAnswered):
			if stored == nil {
				continue // answered by another execution meanwhile: read it in the next round
			}
			if !bytes.Equal(stored.fingerprint, fp) {
				s.observe(ctx, Reused)
				return Response{}, false, reused()
			}
			s.observe(ctx, Replayed)
			return stored.Response, true, nil
		case db.IsUniqueViolation(err):
			continue // the deferred answer met an answer already there: read it next round
		case isLockTimeout(err):
			// A wait ran past InFlightWait. Usually on another execution of the key, but not
			// only: the claim's insert also waits on locks that have nothing to do with the key
			// (the extension of the locks' index, whose holder a loaded host may not schedule
			// for longer than that), and a first-time key must not be told "in flight" for
			// that. Nothing of this round stays; the next round waits again, and a key that is
			// held all along is in flight after the last round (or gets the holder's answer).
			_ = s.failpoint(WaitTimedOut)
			continue
		default:
			return Response{}, false, problem.Wrap(err, "the request could not be committed")
		}
	}
	s.observe(ctx, InFlight)
	return Response{}, false, inFlight()
}

// fenced carries Store.Fence's refusal out of the transaction.
type fenced struct{ err error }

func (f *fenced) Error() string { return f.err.Error() }
func (f *fenced) Unwrap() error { return f.err }

type answer struct {
	Response
	fingerprint []byte
}

// claim inserts k's lock in tx; it waits at most InFlightWait on another transaction holding
// the key. It returns false when the key has a live answer. A lock whose answer expired is taken
// over, and that answer removed, so the new answer can be a plain insert.
func (s *Store) claim(ctx context.Context, tx pgx.Tx, k Key) (bool, error) {
	now := s.now()
	b := &pgx.Batch{}
	b.Queue(`SET LOCAL lock_timeout = '` + strconv.FormatInt(max(1, s.inFlightWait().Milliseconds()), 10) + `ms'`)
	b.Queue(`
		INSERT INTO idempotency_locks (workspace_id, user_id, operation_id, idem_key, expires_at) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (workspace_id, user_id, operation_id, idem_key) DO NOTHING`,
		k.WorkspaceID, k.UserID, k.OperationID, k.Key, now.Add(s.retention()))
	b.Queue(`SET LOCAL lock_timeout = DEFAULT`)
	br := tx.SendBatch(ctx, b)
	_, err := br.Exec()
	var tag pgconn.CommandTag
	if err == nil {
		tag, err = br.Exec()
	}
	if err == nil {
		_, err = br.Exec()
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil || tag.RowsAffected() == 1 {
		return err == nil, err
	}
	// The key has a committed lock: a live answer, or one past its retention not purged yet.
	tag, err = tx.Exec(ctx, `
		UPDATE idempotency_locks SET expires_at = $5
		WHERE workspace_id = $1 AND user_id = $2 AND operation_id = $3 AND idem_key = $4 AND expires_at <= $6`,
		k.WorkspaceID, k.UserID, k.OperationID, k.Key, now.Add(s.retention()), now)
	if err != nil || tag.RowsAffected() == 0 {
		return false, err
	}
	_, err = tx.Exec(ctx, `
		DELETE FROM idempotency_keys WHERE workspace_id = $1 AND user_id = $2 AND operation_id = $3 AND idem_key = $4`,
		k.WorkspaceID, k.UserID, k.OperationID, k.Key)
	return err == nil, err
}

// read returns the committed answer of k.
func (s *Store) read(ctx context.Context, tx pgx.Tx, k Key) (*answer, error) {
	var (
		a       answer
		headers []byte
	)
	err := tx.QueryRow(ctx, `
		SELECT fingerprint, status, headers, body FROM idempotency_keys
		WHERE workspace_id = $1 AND user_id = $2 AND operation_id = $3 AND idem_key = $4`,
		k.WorkspaceID, k.UserID, k.OperationID, k.Key).Scan(&a.fingerprint, &a.Status, &headers, &a.Body)
	if err != nil {
		return nil, err
	}
	a.Header = http.Header{}
	if err := json.Unmarshal(headers, &a.Header); err != nil {
		return nil, err
	}
	return &a, nil
}

// volatileHeaders are not stored: they describe one transmission, not the answer.
var volatileHeaders = []string{"Date", "Content-Length"}

// complete writes the answer of k, whose lock this transaction holds. The insert is deferred to
// the commit's round trip (db.Defer): nothing reads its result, and a key that somehow had an
// answer without its lock fails the commit on the unique key rather than answering twice.
func (s *Store) complete(ctx context.Context, tx pgx.Tx, k Key, fp []byte, resp Response) error {
	stored := resp.Header.Clone()
	for _, h := range volatileHeaders {
		stored.Del(h)
	}
	if stored == nil {
		stored = http.Header{}
	}
	headers, err := json.Marshal(stored)
	if err != nil {
		return err
	}
	now := s.now()
	if err := db.Defer(ctx, tx, `
		INSERT INTO idempotency_keys (workspace_id, user_id, operation_id, idem_key, fingerprint, state, lease_until, status, headers, body, created_at, expires_at)
		VALUES ($1, $2, $3, $4, $5, 'done', $6, $7, $8, $9, $6, $10)`,
		k.WorkspaceID, k.UserID, k.OperationID, k.Key, fp, now, resp.Status, headers, resp.Body, now.Add(s.retention())); err != nil {
		if db.IsUniqueViolation(err) {
			return errAnswered
		}
		return err
	}
	return s.failpoint(BeforeCommit)
}

// isLockTimeout reports a wait on another transaction that ran out (lock_timeout).
func isLockTimeout(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "55P03"
}

// Purge deletes up to limit answers past their retention, with their locks, and returns how
// many it deleted.
func (s *Store) Purge(ctx context.Context, limit int) (int, error) {
	var n int
	err := s.DB.ReadCommitted(ctx, func(tx pgx.Tx) error {
		now := s.now()
		rows, err := tx.Query(ctx, `
			DELETE FROM idempotency_keys WHERE (workspace_id, user_id, operation_id, idem_key) IN (
				SELECT workspace_id, user_id, operation_id, idem_key FROM idempotency_keys WHERE expires_at < $1 LIMIT $2)
			RETURNING workspace_id, user_id, operation_id, idem_key`, now, limit)
		if err != nil {
			return err
		}
		var ws, users, ops, keys []string
		for rows.Next() {
			var k Key
			if err := rows.Scan(&k.WorkspaceID, &k.UserID, &k.OperationID, &k.Key); err != nil {
				return err
			}
			ws, users, ops, keys = append(ws, k.WorkspaceID), append(users, k.UserID), append(ops, k.OperationID), append(keys, k.Key)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		n = len(keys)
		for i := range keys {
			// A lock whose answer was taken over in the meantime has a later expiry: it stays.
			if _, err := tx.Exec(ctx, `DELETE FROM idempotency_locks
				WHERE workspace_id = $1 AND user_id = $2 AND operation_id = $3 AND idem_key = $4 AND expires_at < $5`,
				ws[i], users[i], ops[i], keys[i], now); err != nil {
				return err
			}
		}
		return nil
	})
	return n, err
}
