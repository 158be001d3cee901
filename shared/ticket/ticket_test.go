package ticket

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2025, 11, 22, 10, 0, 0, 0, time.UTC)

func admission() *Admission {
	return &Admission{
		RequestID:      "rr_1",
		AttemptID:      "ra_1",
		RequestDigest:  "sha256:" + strings.Repeat("a", 64),
		WorkspaceID:    "ws_1",
		WorkerID:       "w1",
		Epoch:          "e1",
		SlotGeneration: 7,
		IssuedAt:       t0,
		AcceptBy:       t0.Add(30 * time.Second),
		StopBy:         t0.Add(2 * time.Minute),
	}
}

type bundle struct {
	signer *Signer
	keys   *KeySet
}

func setup(t *testing.T) bundle {
	t.Helper()
	s, err := GenerateSigner("k1")
	if err != nil {
		t.Fatal(err)
	}
	ks, err := NewKeySet(s.PublicKey())
	if err != nil {
		t.Fatal(err)
	}
	return bundle{signer: s, keys: ks}
}

func TestRoundTrip(t *testing.T) {
	b := setup(t)
	tok, err := b.signer.Sign(admission())
	if err != nil {
		t.Fatal(err)
	}
	var got Admission
	if err := b.keys.Verify(tok, t0.Add(time.Second), &got); err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if got != *admission() {
		t.Fatalf("claims changed: %+v", got)
	}
}

func TestVerifyFailures(t *testing.T) {
	b := setup(t)
	tok, err := b.signer.Sign(admission())
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(tok, ".")
	other, _ := GenerateSigner("k2")
	otherTok, _ := other.Sign(admission())
	sameKidOther, _ := GenerateSigner("k1")
	forged, _ := sameKidOther.Sign(admission())

	tamperedClaims := func() string {
		raw, _ := base64.RawURLEncoding.DecodeString(parts[1])
		raw = []byte(strings.Replace(string(raw), `"slot_generation":7`, `"slot_generation":8`, 1))
		return parts[0] + "." + base64.RawURLEncoding.EncodeToString(raw) + "." + parts[2]
	}()
	tamperedHeader := func() string {
		h := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"EdDSA","kid":"k1","typ":"preview-access.v1"}`))
		return h + "." + parts[1] + "." + parts[2]
	}()
	algNone := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","kid":"k1","typ":"render-admission.v1"}`)) + "." + parts[1] + "."

	cases := []struct {
		name  string
		token string
		now   time.Time
		want  error
	}{
		{"tampered claims", tamperedClaims, t0, ErrBadSignature},
		{"tampered header", tamperedHeader, t0, ErrBadSignature},
		{"forged with same kid", forged, t0, ErrBadSignature},
		{"unknown kid", otherTok, t0, ErrUnknownKey},
		{"alg none", algNone, t0, ErrMalformed},
		{"two parts", parts[0] + "." + parts[1], t0, ErrMalformed},
		{"garbage", "not a token", t0, ErrMalformed},
		{"empty", "", t0, ErrMalformed},
		{"too long", strings.Repeat("a", MaxTokenBytes+1), t0, ErrMalformed},
		{"expired", tok, t0.Add(31 * time.Second), ErrExpired},
		{"issued in the future", tok, t0.Add(-time.Minute), ErrNotYetValid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got Admission
			err := b.keys.Verify(tc.token, tc.now, &got)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Verify = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestExpiredStillReturnsAuthenticClaims(t *testing.T) {
	b := setup(t)
	tok, _ := b.signer.Sign(admission())
	var got Admission
	err := b.keys.Verify(tok, t0.Add(time.Hour), &got)
	if !errors.Is(err, ErrExpired) {
		t.Fatalf("want ErrExpired, got %v", err)
	}
	if got.AttemptID != "ra_1" {
		t.Fatalf("claims not decoded on expiry: %+v", got)
	}
}

func TestClockSkewOnlyForIssueTime(t *testing.T) {
	b := setup(t)
	tok, _ := b.signer.Sign(admission())
	var got Admission
	if err := b.keys.Verify(tok, t0.Add(-DefaultMaxClockSkew+time.Millisecond), &got); err != nil {
		t.Fatalf("issue time within skew refused: %v", err)
	}
	if err := b.keys.Verify(tok, t0.Add(30*time.Second+time.Millisecond), &got); !errors.Is(err, ErrExpired) {
		t.Fatalf("expiry must not be stretched by skew, got %v", err)
	}
	b.keys.MaxClockSkew = time.Minute
	if err := b.keys.Verify(tok, t0.Add(-59*time.Second), &got); err != nil {
		t.Fatalf("custom skew not applied: %v", err)
	}
}

func TestTypeConfusion(t *testing.T) {
	b := setup(t)
	pa := &PreviewAccess{WorkspaceID: "ws_1", SnapshotRef: "snap_1", Origin: "http://127.0.0.1:8080", Path: "/p", IssuedAt: t0, ExpiresAt: t0.Add(time.Minute)}
	tok, err := b.signer.Sign(pa)
	if err != nil {
		t.Fatal(err)
	}
	var adm Admission
	if err := b.keys.Verify(tok, t0, &adm); !errors.Is(err, ErrWrongType) {
		t.Fatalf("preview token accepted as admission: %v", err)
	}
	var got PreviewAccess
	if err := b.keys.Verify(tok, t0, &got); err != nil {
		t.Fatal(err)
	}
	if !got.Allows("http://127.0.0.1:8080", "/p") || got.Allows("http://127.0.0.1:8080", "/p/") || got.Allows("http://127.0.0.1:8081", "/p") {
		t.Fatal("Allows must match origin and path exactly")
	}
}

func TestInvalidClaims(t *testing.T) {
	b := setup(t)
	cases := map[string]func(a *Admission){
		"no attempt":          func(a *Admission) { a.AttemptID = "" },
		"zero generation":     func(a *Admission) { a.SlotGeneration = 0 },
		"stop before accept":  func(a *Admission) { a.StopBy = a.AcceptBy.Add(-time.Second) },
		"accept before issue": func(a *Admission) { a.AcceptBy = a.IssuedAt.Add(-time.Second) },
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			a := admission()
			mutate(a)
			tok, _ := b.signer.Sign(a)
			var got Admission
			if err := b.keys.Verify(tok, t0, &got); !errors.Is(err, ErrInvalidClaims) {
				t.Fatalf("want ErrInvalidClaims, got %v", err)
			}
		})
	}
	t.Run("preview origin with path", func(t *testing.T) {
		tok, _ := b.signer.Sign(&PreviewAccess{WorkspaceID: "w", SnapshotRef: "s", Origin: "http://h/x", Path: "/p", IssuedAt: t0, ExpiresAt: t0.Add(time.Minute)})
		var got PreviewAccess
		if err := b.keys.Verify(tok, t0, &got); !errors.Is(err, ErrInvalidClaims) {
			t.Fatalf("want ErrInvalidClaims, got %v", err)
		}
	})
}

func TestRotation(t *testing.T) {
	oldS, _ := GenerateSigner("2025a")
	newS, _ := GenerateSigner("2025b")
	both, err := ParseKeySet(oldS.PublicKey().String() + ", " + newS.PublicKey().String())
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(both.KeyIDs(), ","); got != "2025a,2025b" {
		t.Fatalf("KeyIDs = %s", got)
	}
	onlyNew, _ := ParseKeySet(newS.PublicKey().String())
	oldTok, _ := oldS.Sign(admission())
	newTok, _ := newS.Sign(admission())
	var a Admission
	if err := both.Verify(oldTok, t0, &a); err != nil {
		t.Fatalf("old key during rotation: %v", err)
	}
	if err := both.Verify(newTok, t0, &a); err != nil {
		t.Fatalf("new key during rotation: %v", err)
	}
	if err := onlyNew.Verify(oldTok, t0, &a); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("retired key still accepted: %v", err)
	}
	again, err := ParseKeySet(both.String())
	if err != nil || again.String() != both.String() {
		t.Fatalf("String does not round-trip: %v", err)
	}
}

func TestSignerEncoding(t *testing.T) {
	s, _ := GenerateSigner("k1")
	enc := s.EncodePrivate()
	back, err := ParseSigner(enc)
	if err != nil {
		t.Fatal(err)
	}
	if back.PublicKey().String() != s.PublicKey().String() {
		t.Fatal("private key does not round-trip")
	}
	seed := strings.SplitN(enc, ":", 2)[1]
	for _, shown := range []string{fmt.Sprint(s), fmt.Sprintf("%v %s %+v", s, s, s)} {
		if strings.Contains(shown, seed) {
			t.Fatal("Signer printed its private key")
		}
	}
}

func TestParseErrors(t *testing.T) {
	good, _ := GenerateSigner("k1")
	cases := map[string]string{
		"empty":          "",
		"no colon":       "abc",
		"bad kid":        "k 1:" + strings.SplitN(good.PublicKey().String(), ":", 2)[1],
		"bad base64":     "k1:!!!",
		"short key":      "k1:" + base64.StdEncoding.EncodeToString([]byte("short")),
		"duplicate kids": good.PublicKey().String() + "," + good.PublicKey().String(),
	}
	for name, in := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := ParseKeySet(in); err == nil {
				t.Fatalf("ParseKeySet(%q) accepted", in)
			}
		})
	}
	if _, err := ParseSigner("k1:" + base64.StdEncoding.EncodeToString(make([]byte, 5))); err == nil {
		t.Fatal("short seed accepted")
	}
}
