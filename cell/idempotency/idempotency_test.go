package idempotency

import (
	"context"
	"crypto/sha256"
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
	if r, err := s.Begin(ctx, k, fp); r != nil || err != nil {
		t.Fatalf("first begin: %v %v", r, err)
	}
	// The process "crashes" here: no Complete. Within the lease the key is busy…
	_, err := s.Begin(ctx, k, fp)
	if pe := problem.As(err); pe.Code != problem.IdempotencyInFlight || pe.RetryAfter == 0 || !pe.Retryable {
		t.Fatalf("within lease: %v", err)
	}
	// …and after it, a retry runs again.
	now = now.Add(2 * time.Minute)
	if r, err := s.Begin(ctx, k, fp); r != nil || err != nil {
		t.Fatalf("after lease: %v %v", r, err)
	}
	if err := s.Complete(ctx, k, fp, Response{Status: 201, Header: http.Header{"Location": {"/x/1"}}, Body: []byte("ok")}); err != nil {
		t.Fatal(err)
	}
	r, err := s.Begin(ctx, k, fp)
	if err != nil || r == nil || r.Status != 201 || string(r.Body) != "ok" || r.Header.Get("Location") != "/x/1" {
		t.Fatalf("replay: %+v %v", r, err)
	}
	// Different fingerprint: 409.
	if _, err := s.Begin(ctx, k, Fingerprint("POST", "/x", nil, []byte(`{"a":2}`))); problem.As(err).Code != problem.IdempotencyConflict {
		t.Fatalf("reuse: %v", err)
	}
	// Retention over: purged, and the key is new again.
	now = now.Add(25 * time.Hour)
	if n, err := s.Purge(ctx, 100); err != nil || n != 1 {
		t.Fatalf("purge: %d %v", n, err)
	}
	if r, err := s.Begin(ctx, k, Fingerprint("POST", "/x", nil, []byte(`{"a":2}`))); r != nil || err != nil {
		t.Fatalf("after retention: %v %v", r, err)
	}
	// Release forgets an execution so a retry can run at once.
	if err := s.Release(ctx, k, Fingerprint("POST", "/x", nil, []byte(`{"a":2}`))); err != nil {
		t.Fatal(err)
	}
	if r, err := s.Begin(ctx, k, fp); r != nil || err != nil {
		t.Fatalf("after release: %v %v", r, err)
	}
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
