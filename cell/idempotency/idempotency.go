// Package idempotency stores Idempotency-Key records so that a repeated request gets the first
// answer instead of running again.
//
// Rules (spec, "Idempotency rules"): the boundary is user + workspace + operation + key; the
// fingerprint is method + path + canonical body; same key and fingerprint replay the first
// answer byte for byte; same key with another fingerprint is a 409; same key while the first
// request still executes is a 409 with Retry-After and a retryable marker. Records are kept for
// Retention and then purged; an executing record holds a lease, so a crash mid-request frees the
// key once the lease ends.
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

// Response is a stored answer.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// Store keeps records in the cell database.
type Store struct {
	DB *db.DB
	// Lease is how long an executing record blocks its key. It must exceed the longest request.
	Lease time.Duration
	// Retention is how long a finished record is replayed.
	Retention time.Duration
	// Now is the clock; nil is time.Now.
	Now func() time.Time
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

// Begin claims the key. It returns a stored answer to replay, or nil and an attempt token when
// the caller must execute the request and then call Complete or Release with that token.
func (s *Store) Begin(ctx context.Context, k Key, fp []byte) (*Response, string, error) {
	var replay *Response
	now := s.now()
	attempt := ids.New("att")
	err := s.DB.Tx(ctx, func(tx pgx.Tx) error {
		replay = nil
		var (
			storedFP   []byte
			state      string
			leaseUntil time.Time
			expiresAt  time.Time
			status     int
			headers    []byte
			body       []byte
		)
		err := tx.QueryRow(ctx, `
			SELECT fingerprint, state, lease_until, expires_at, status, headers, body FROM idempotency_keys
			WHERE workspace_id = $1 AND user_id = $2 AND operation_id = $3 AND idem_key = $4 FOR UPDATE`,
			k.WorkspaceID, k.UserID, k.OperationID, k.Key).
			Scan(&storedFP, &state, &leaseUntil, &expiresAt, &status, &headers, &body)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			_, err = tx.Exec(ctx, `
				INSERT INTO idempotency_keys (workspace_id, user_id, operation_id, idem_key, fingerprint, state, lease_until, expires_at, attempt)
				VALUES ($1, $2, $3, $4, $5, 'executing', $6, $7, $8)`,
				k.WorkspaceID, k.UserID, k.OperationID, k.Key, fp, now.Add(s.lease()), now.Add(s.retention()), attempt)
			return err
		case err != nil:
			return err
		}
		expired := !expiresAt.After(now)
		if !expired && !bytes.Equal(storedFP, fp) {
			return reused()
		}
		if expired || (state == "executing" && !leaseUntil.After(now)) {
			// An expired record, or the same request whose earlier execution lost its lease (the
			// process died): start over under a new attempt token.
			_, err = tx.Exec(ctx, `
				UPDATE idempotency_keys SET fingerprint = $5, state = 'executing', lease_until = $6, expires_at = $7,
				       status = 0, headers = '{}', body = ''::BYTEA, created_at = $8, attempt = $9
				WHERE workspace_id = $1 AND user_id = $2 AND operation_id = $3 AND idem_key = $4`,
				k.WorkspaceID, k.UserID, k.OperationID, k.Key, fp, now.Add(s.lease()), now.Add(s.retention()), now, attempt)
			return err
		}
		if state == "executing" {
			return inFlight()
		}
		r := &Response{Status: status, Header: http.Header{}, Body: body}
		if err := json.Unmarshal(headers, &r.Header); err != nil {
			return err
		}
		replay = r
		return nil
	})
	if db.IsUniqueViolation(err) {
		return nil, "", inFlight()
	}
	if err != nil {
		var pe *problem.Error
		if errors.As(err, &pe) {
			return nil, "", pe
		}
		return nil, "", problem.Wrap(err, "idempotency record unavailable")
	}
	if replay != nil {
		return replay, "", nil
	}
	return nil, attempt, nil
}

// ErrLeaseLost is returned by Complete when the execution's lease was taken over.
var ErrLeaseLost = errors.New("idempotency: the execution's lease was taken over")

// Complete stores the answer of the execution holding attempt, for replay.
func (s *Store) Complete(ctx context.Context, k Key, attempt string, r Response) error {
	h, err := json.Marshal(r.Header)
	if err != nil {
		return err
	}
	tag, err := s.DB.Pool.Exec(ctx, `
		UPDATE idempotency_keys SET state = 'done', status = $6, headers = $7, body = $8
		WHERE workspace_id = $1 AND user_id = $2 AND operation_id = $3 AND idem_key = $4 AND attempt = $5 AND state = 'executing'`,
		k.WorkspaceID, k.UserID, k.OperationID, k.Key, attempt, r.Status, h, r.Body)
	if err == nil && tag.RowsAffected() == 0 {
		return ErrLeaseLost
	}
	return err
}

// Release forgets the execution holding attempt when its answer must not be replayed (a
// server error), so a retry runs it again.
func (s *Store) Release(ctx context.Context, k Key, attempt string) error {
	_, err := s.DB.Pool.Exec(ctx, `
		DELETE FROM idempotency_keys
		WHERE workspace_id = $1 AND user_id = $2 AND operation_id = $3 AND idem_key = $4 AND attempt = $5 AND state = 'executing'`,
		k.WorkspaceID, k.UserID, k.OperationID, k.Key, attempt)
	return err
}

// Purge deletes up to limit records past their retention and returns how many it deleted.
func (s *Store) Purge(ctx context.Context, limit int) (int, error) {
	rows, err := s.DB.Pool.Query(ctx, `
		SELECT workspace_id, user_id, operation_id, idem_key FROM idempotency_keys
		WHERE expires_at < $1 AND (state = 'done' OR lease_until < $1) LIMIT $2`, s.now(), limit)
	if err != nil {
		return 0, err
	}
	keys, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Key, error) {
		var k Key
		err := r.Scan(&k.WorkspaceID, &k.UserID, &k.OperationID, &k.Key)
		return k, err
	})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, k := range keys {
		tag, err := s.DB.Pool.Exec(ctx, `
			DELETE FROM idempotency_keys WHERE workspace_id = $1 AND user_id = $2 AND operation_id = $3 AND idem_key = $4 AND expires_at < $5`,
			k.WorkspaceID, k.UserID, k.OperationID, k.Key, s.now())
		if err != nil {
			return n, err
		}
		n += int(tag.RowsAffected())
	}
	return n, nil
}
