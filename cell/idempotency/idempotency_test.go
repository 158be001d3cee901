package idempotency

import (
	"context"
	"crypto/sha256"
	"errors"
	"net/http"
	"testing"
	"time"

	"slidecells/migrations"
	"slidecells/shared/db/dbtest"
	"slidecells/shared/problem"
)

func TestLeaseFreesAStuckKeyAndPurgeRemovesExpired(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := &Store{DB: dbtest.Open(t, dbtest.NewDatabase(t, migrations.FS, migrations.Cell)),
		Lease: time.Minute, Retention: 24 * time.Hour, Now: func() time.Time { return now }}
	ctx := context.Background()
	k := Key{WorkspaceID: "ws", UserID: "u", OperationID: "op", Key: "k1"}
	fp := Fingerprint("POST", "/x", nil, []byte(`{"a":1}`))
	first, err := begin(s, ctx, k, fp)
	if first.replay != nil || err != nil || first.attempt == "" {
		t.Fatalf("first begin: %+v %v", first, err)
	}
	// The process "crashes" here: no Complete. Within the lease the key is busy…
	_, _, err = s.Begin(ctx, k, fp)
	if pe := problem.As(err); pe.Code != problem.IdempotencyInFlight || pe.RetryAfter == 0 || !pe.Retryable {
		t.Fatalf("within lease: %v", err)
	}
	// …also for a different request, which is a reuse, lease or not.
	other := Fingerprint("POST", "/x", nil, []byte(`{"a":2}`))
	now = now.Add(2 * time.Minute)
	if _, _, err := s.Begin(ctx, k, other); problem.As(err).Code != problem.IdempotencyConflict {
		t.Fatalf("different request after the lease: %v", err)
	}
	// After the lease the same request runs again, under a new attempt.
	second, err := begin(s, ctx, k, fp)
	if second.replay != nil || err != nil || second.attempt == first.attempt {
		t.Fatalf("after lease: %+v %v", second, err)
	}
	// The first execution, come back to life, can neither complete nor release the record.
	if err := s.Complete(ctx, k, first.attempt, Response{Status: 500}); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("stale complete: %v", err)
	}
	if err := s.Release(ctx, k, first.attempt); err != nil {
		t.Fatal(err)
	}
	if err := s.Complete(ctx, k, second.attempt, Response{Status: 201, Header: http.Header{"Location": {"/x/1"}}, Body: []byte("ok")}); err != nil {
		t.Fatal(err)
	}
	r, err := begin(s, ctx, k, fp)
	if err != nil || r.replay == nil || r.replay.Status != 201 || string(r.replay.Body) != "ok" || r.replay.Header.Get("Location") != "/x/1" {
		t.Fatalf("replay: %+v %v", r, err)
	}
	// Different fingerprint: 409.
	if _, _, err := s.Begin(ctx, k, other); problem.As(err).Code != problem.IdempotencyConflict {
		t.Fatalf("reuse: %v", err)
	}
	// Retention over: purged, and the key is new again.
	now = now.Add(25 * time.Hour)
	if n, err := s.Purge(ctx, 100); err != nil || n != 1 {
		t.Fatalf("purge: %d %v", n, err)
	}
	third, err := begin(s, ctx, k, other)
	if third.replay != nil || err != nil {
		t.Fatalf("after retention: %+v %v", third, err)
	}
	// Release forgets an execution so a retry can run at once.
	if err := s.Release(ctx, k, third.attempt); err != nil {
		t.Fatal(err)
	}
	if r, err := begin(s, ctx, k, fp); r.replay != nil || err != nil {
		t.Fatalf("after release: %+v %v", r, err)
	}
}

// begun is what Begin returned.
type begun struct {
	replay  *Response
	attempt string
}

func begin(s *Store, ctx context.Context, k Key, fp []byte) (begun, error) {
	r, a, err := s.Begin(ctx, k, fp)
	return begun{r, a}, err
}

func TestFingerprintCanonicalJSON(t *testing.T) {
	a := Fingerprint("POST", "/p", nil, []byte(`{"b":1,"a":[1,2]}`))
	b := Fingerprint("POST", "/p", nil, []byte(" {\"a\": [1, 2], \"b\": 1}\n"))
	if string(a) != string(b) {
		t.Fatal("reordered JSON fingerprints differ")
	}
	for _, other := range [][]byte{
		Fingerprint("POST", "/p", nil, []byte(`{"b":2,"a":[1,2]}`)),
		Fingerprint("PUT", "/p", nil, []byte(`{"b":1,"a":[1,2]}`)),
		Fingerprint("POST", "/q", nil, []byte(`{"b":1,"a":[1,2]}`)),
		Fingerprint("POST", "/p", nil, []byte(`{"b":1.0,"a":[1,2]}`)),
		Fingerprint("POST", "/p", http.Header{"Content-Type": {"text/plain"}}, []byte(`{"b":1,"a":[1,2]}`)),
		Fingerprint("POST", "/p", http.Header{"If-Match": {`"abc"`}}, []byte(`{"b":1,"a":[1,2]}`)),
	} {
		if string(a) == string(other) {
			t.Fatal("different requests share a fingerprint")
		}
	}
}

func TestFingerprintDigestMatchesBinaryBody(t *testing.T) {
	body := []byte("\x89PNG binary")
	d := sha256.Sum256(body)
	if string(Fingerprint("PUT", "/a", nil, body)) != string(FingerprintDigest("PUT", "/a", nil, d[:])) {
		t.Fatal("spooled and in-memory fingerprints of the same bytes differ")
	}
}

func TestValidKey(t *testing.T) {
	for k, want := range map[string]bool{"abc-123": true, "": false, "a b": false, string(make([]byte, 256)): false} {
		if ValidKey(k) != want {
			t.Errorf("ValidKey(%q) != %v", k, want)
		}
	}
}
