package api

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"net/http"
	"os"

	"slidecells/cell/idempotency"
	"slidecells/shared/cellproto"
	"slidecells/shared/db"
	"slidecells/shared/problem"
)

// DefaultMaxBodyBytes caps request bodies of operations that declare no limit.
const DefaultMaxBodyBytes = 1 << 20

// opMux is the mux huma registers routes on. It wraps every operation's handler in the
// pipeline its registry entry asks for, so nothing reaches a handler unchecked.
type opMux struct{ s *Server }

func (m opMux) HandleFunc(pattern string, h func(http.ResponseWriter, *http.Request)) {
	if op, ok := m.s.byPattern[pattern]; ok {
		m.s.Mux.HandleFunc(pattern, m.s.pipeline(op, h))
		return
	}
	switch pattern { // the OpenAPI documents
	case "GET /openapi-3.0.json":
		h = m.s.openAPI30.serve(m.s, false)
	case "GET /openapi-3.0.yaml":
		h = m.s.openAPI30.serve(m.s, true)
	}
	m.s.Mux.HandleFunc(pattern, h)
}

func (m opMux) ServeHTTP(w http.ResponseWriter, r *http.Request) { m.s.Mux.ServeHTTP(w, r) }

// pipeline runs, in order: trace ID, admission and authentication, workspace authorization
// (membership, the workspace's rate, tenancy guard, scopes), idempotency, then the handler.
func (s *Server) pipeline(op Operation, next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		trace := traceIDOf(r)
		w.Header().Set(cellproto.HeaderRequestID, trace)
		ctx := context.WithValue(r.Context(), traceKey, trace)
		ctx = db.WithOperation(ctx, op.ID)
		nameOperation(ctx, op.ID)
		if op.Access != Public {
			// Admission: only what the caller owns is charged before authentication (its
			// address's failures, its credential); the workspace's bucket only once the caller
			// is a member (authorize). All of it is answered from memory and the directory
			// cache, before any cell database work.
			p, err := s.admit(ctx, r)
			if err != nil {
				s.fail(ctx, w, err)
				return
			}
			ctx = context.WithValue(ctx, principalKey, p)
			if op.Access == InWorkspace {
				scope, err := s.authorize(ctx, r, op, p)
				if err != nil {
					s.fail(ctx, w, err)
					return
				}
				ctx = context.WithValue(ctx, scopeKey, scope)
			}
		}
		r = r.WithContext(ctx)
		if err := s.edgeCheck(r, op); err != nil {
			s.fail(ctx, w, err)
			return
		}
		if op.Idempotency == KeyRequired && !s.benchWithoutIdempotency {
			s.idempotent(w, r, op, next)
			return
		}
		s.serve(next, w, r)
	}
}

// clientGone reports whether the client closed the request before its answer.
func clientGone(r *http.Request) bool {
	return errors.Is(r.Context().Err(), context.Canceled)
}

// replayedHeader marks an answer replayed from an idempotency record.
const replayedHeader = "Idempotency-Replayed"

func (s *Server) idempotent(w http.ResponseWriter, r *http.Request, op Operation, next http.HandlerFunc) {
	ctx := r.Context()
	key := r.Header.Get("Idempotency-Key")
	if key == "" {
		s.fail(ctx, w, problem.New(problem.IdempotencyKeyRequired, "this operation needs an Idempotency-Key header"))
		return
	}
	if !idempotency.ValidKey(key) {
		s.fail(ctx, w, problem.New(problem.IdempotencyKeyInvalid, "Idempotency-Key must be 1-255 printable ASCII characters"))
		return
	}
	limit := op.MaxBodyBytes
	if limit <= 0 {
		limit = DefaultMaxBodyBytes
	}
	fp, rewind, cleanup, err := fingerprintBody(r, limit)
	defer cleanup()
	if err != nil {
		s.fail(ctx, w, err)
		return
	}
	ws := ""
	if op.Access == InWorkspace {
		ws = ScopeFrom(ctx).WorkspaceID()
	}
	k := idempotency.Key{WorkspaceID: ws, UserID: PrincipalFrom(ctx).UserID, OperationID: op.ID, Key: key}
	// The handler runs inside the transaction that stores its answer: its writes and the answer
	// commit together. Its answer is held until then, so a client never sees an answer that
	// did not commit.
	resp, replayed, err := s.Idem.Run(ctx, k, fp, func(ctx context.Context) idempotency.Response {
		ctx = newAttempt(ctx)
		if err := rewind(); err != nil {
			return idempotency.Response{Status: http.StatusInternalServerError}
		}
		bw := &bufferedWriter{header: http.Header{}}
		s.serve(next, bw, r.WithContext(ctx))
		if bw.status == 0 {
			bw.status = http.StatusOK
		}
		return idempotency.Response{Status: bw.status, Header: bw.header, Body: bw.body.Bytes()}
	})
	if err != nil {
		s.fail(ctx, w, err)
		return
	}
	h := w.Header()
	for name, v := range resp.Header {
		if name != cellproto.HeaderRequestID {
			h[name] = v
		}
	}
	if replayed {
		h.Set(replayedHeader, "true")
	}
	w.WriteHeader(resp.Status)
	_, _ = w.Write(resp.Body)
}

// bufferedWriter holds an answer until its transaction has committed.
type bufferedWriter struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (b *bufferedWriter) Header() http.Header { return b.header }

func (b *bufferedWriter) WriteHeader(code int) {
	if b.status == 0 {
		b.status = code
	}
}

func (b *bufferedWriter) Write(p []byte) (int, error) {
	if b.status == 0 {
		b.status = http.StatusOK
	}
	return b.body.Write(p)
}

// memoryBodyLimit is how much of a body is held in memory to fingerprint it; larger bodies
// (uploads) are spooled to a temporary file while hashing, so memory stays flat.
const memoryBodyLimit = 1 << 20

// fingerprintBody reads the body once, bounded by limit, and fingerprints the request. rewind
// puts the body, from its start, back on r (the handler may run more than once); cleanup
// removes any spool file.
func fingerprintBody(r *http.Request, limit int64) (fp []byte, rewind func() error, cleanup func(), err error) {
	cleanup = func() {}
	head, err := io.ReadAll(io.LimitReader(r.Body, min(limit, memoryBodyLimit)+1))
	if err != nil {
		return nil, nil, cleanup, bodyReadError(err)
	}
	if int64(len(head)) > limit {
		return nil, nil, cleanup, problem.New(problem.PayloadTooLarge, "the request body is larger than %d bytes", limit)
	}
	if int64(len(head)) <= memoryBodyLimit {
		rewind = func() error {
			r.Body = io.NopCloser(bytes.NewReader(head))
			return nil
		}
		return idempotency.Fingerprint(r.Method, r.URL.RequestURI(), r.Header, head), rewind, cleanup, nil
	}
	f, err := os.CreateTemp("", "slidecells-body-")
	if err != nil {
		return nil, nil, cleanup, problem.Wrap(err, "cannot spool the request body")
	}
	cleanup = func() { f.Close(); os.Remove(f.Name()) }
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), io.MultiReader(bytes.NewReader(head), io.LimitReader(r.Body, limit+1-int64(len(head)))))
	if err != nil {
		return nil, nil, cleanup, bodyReadError(err)
	}
	if n > limit {
		return nil, nil, cleanup, problem.New(problem.PayloadTooLarge, "the request body is larger than %d bytes", limit)
	}
	rewind = func() error {
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return err
		}
		r.Body = io.NopCloser(f)
		r.ContentLength = n
		return nil
	}
	return idempotency.FingerprintDigest(r.Method, r.URL.RequestURI(), r.Header, h.Sum(nil)), rewind, cleanup, nil
}
