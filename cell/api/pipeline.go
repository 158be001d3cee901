package api

import (
	"bytes"
	"context"
	"crypto/sha256"
	"io"
	"net/http"
	"os"

	"go.uber.org/zap"

	"slidecells/cell/idempotency"
	"slidecells/cell/tenancy"
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
	m.s.Mux.HandleFunc(pattern, h) // the OpenAPI document
}

func (m opMux) ServeHTTP(w http.ResponseWriter, r *http.Request) { m.s.Mux.ServeHTTP(w, r) }

// pipeline runs, in order: trace ID, authentication, workspace authorization (membership,
// tenancy guard, scopes), idempotency, then the handler.
func (s *Server) pipeline(op Operation, next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		trace := traceIDOf(r)
		w.Header().Set(tenancy.HeaderRequestID, trace)
		ctx := context.WithValue(r.Context(), traceKey, trace)
		if op.Access != Public {
			p, err := s.Auth.Authenticate(ctx, r.Header.Get("Authorization"))
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
		if op.Idempotency == KeyRequired {
			s.idempotent(w, r, op, next)
			return
		}
		next(w, r)
	}
}

// fail writes an error answer and logs its internal cause: the body and headers every error
// of the cell gets (see toHuma).
func (s *Server) fail(ctx context.Context, w http.ResponseWriter, err error) {
	problem.Write(w, s.logFailure(ctx, err), TraceID(ctx))
}

// replayedHeader marks an answer replayed from an idempotency record.
const replayedHeader = "Idempotency-Replayed"

func (s *Server) idempotent(w http.ResponseWriter, r *http.Request, op Operation, next http.HandlerFunc) {
	ctx := r.Context()
	key := r.Header.Get("Idempotency-Key")
	if key == "" {
		s.fail(ctx, w, problem.New(problem.IdempotencyKeyNeeded, "this operation needs an Idempotency-Key header"))
		return
	}
	if !idempotency.ValidKey(key) {
		s.fail(ctx, w, problem.New(problem.IdempotencyKeyBad, "Idempotency-Key must be 1-255 printable ASCII characters"))
		return
	}
	limit := op.MaxBodyBytes
	if limit <= 0 {
		limit = DefaultMaxBodyBytes
	}
	fp, cleanup, err := fingerprintBody(r, limit)
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
	replay, attempt, err := s.Idem.Begin(ctx, k, fp)
	if err != nil {
		s.fail(ctx, w, err)
		return
	}
	if replay != nil {
		h := w.Header()
		for name, v := range replay.Header {
			h[name] = v
		}
		h.Set(replayedHeader, "true")
		w.WriteHeader(replay.Status)
		_, _ = w.Write(replay.Body)
		return
	}
	rec := &statusWriter{ResponseWriter: w, tee: &bytes.Buffer{}}
	release := func() { _ = s.Idem.Release(context.WithoutCancel(ctx), k, attempt) }
	finished := false
	defer func() {
		if !finished {
			release() // the handler panicked: free the key so a retry can run
		}
	}()
	next(rec, r)
	finished = true
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	// Server errors are not answers to replay, and a 421 belongs to the router's placement, not
	// to the request: both free the key so the retry (here or on the owning cell) runs.
	if rec.status >= 500 || rec.status == http.StatusMisdirectedRequest {
		release()
		return
	}
	stored := http.Header{}
	for name, v := range w.Header() {
		switch name {
		case "Date", "Content-Length", tenancy.HeaderRequestID:
			continue
		}
		stored[name] = v
	}
	// If storing the answer fails, the record stays executing until its lease ends: a retry
	// meanwhile gets 409 in-flight rather than running a request that may have committed.
	if err := s.Idem.Complete(context.WithoutCancel(ctx), k, attempt, idempotency.Response{Status: rec.status, Header: stored, Body: rec.tee.Bytes()}); err != nil {
		s.Log.Error("idempotency record not completed", zap.String("trace_id", TraceID(ctx)), zap.Error(err))
	}
}

// memoryBodyLimit is how much of a body is held in memory to fingerprint it; larger bodies
// (uploads) are spooled to a temporary file while hashing, so memory stays flat.
const memoryBodyLimit = 1 << 20

// fingerprintBody reads the body once, bounded by limit, fingerprints the request and puts a
// replayable body back on r. cleanup removes any spool file.
func fingerprintBody(r *http.Request, limit int64) (fp []byte, cleanup func(), err error) {
	cleanup = func() {}
	head, err := io.ReadAll(io.LimitReader(r.Body, min(limit, memoryBodyLimit)+1))
	if err != nil {
		return nil, cleanup, problem.New(problem.BadRequest, "the request body could not be read")
	}
	if int64(len(head)) > limit {
		return nil, cleanup, problem.New(problem.PayloadTooLarge, "the request body is larger than %d bytes", limit)
	}
	if int64(len(head)) <= memoryBodyLimit {
		r.Body = io.NopCloser(bytes.NewReader(head))
		return idempotency.Fingerprint(r.Method, r.URL.RequestURI(), r.Header, head), cleanup, nil
	}
	f, err := os.CreateTemp("", "slidecells-body-")
	if err != nil {
		return nil, cleanup, problem.Wrap(err, "cannot spool the request body")
	}
	cleanup = func() { f.Close(); os.Remove(f.Name()) }
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), io.MultiReader(bytes.NewReader(head), io.LimitReader(r.Body, limit+1-int64(len(head)))))
	if err != nil {
		return nil, cleanup, problem.New(problem.BadRequest, "the request body could not be read")
	}
	if n > limit {
		return nil, cleanup, problem.New(problem.PayloadTooLarge, "the request body is larger than %d bytes", limit)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, cleanup, problem.Wrap(err, "cannot spool the request body")
	}
	r.Body = io.NopCloser(f)
	r.ContentLength = n
	return idempotency.FingerprintDigest(r.Method, r.URL.RequestURI(), r.Header, h.Sum(nil)), cleanup, nil
}
