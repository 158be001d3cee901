package ticket

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Verification errors. Callers map them to their own error codes; the
// messages are safe to show because they never include the token.
var (
	ErrMalformed     = errors.New("ticket: malformed token")
	ErrUnknownKey    = errors.New("ticket: unknown key ID")
	ErrBadSignature  = errors.New("ticket: signature does not verify")
	ErrWrongType     = errors.New("ticket: token has another type")
	ErrInvalidClaims = errors.New("ticket: claims incomplete or inconsistent")
	ErrExpired       = errors.New("ticket: token expired")
	ErrNotYetValid   = errors.New("ticket: token issued in the future")
)

// MaxTokenBytes bounds what Verify will parse; real tokens are well below
// one kilobyte.
const MaxTokenBytes = 8 << 10

const algEdDSA = "EdDSA"

// Claims is a token payload. TokenType goes into the signed header; Check
// validates the values against the verifier's clock and returns ErrExpired,
// ErrNotYetValid or ErrInvalidClaims (possibly wrapped).
type Claims interface {
	TokenType() string
	Check(now time.Time, maxSkew time.Duration) error
}

type header struct {
	Alg string `json:"alg"`
	Kid string `json:"kid"`
	Typ string `json:"typ"`
}

// Sign encodes and signs claims.
func (s *Signer) Sign(c Claims) (string, error) {
	h, err := json.Marshal(header{Alg: algEdDSA, Kid: s.kid, Typ: c.TokenType()})
	if err != nil {
		return "", fmt.Errorf("ticket: encode header: %w", err)
	}
	p, err := json.Marshal(c)
	if err != nil {
		return "", fmt.Errorf("ticket: encode claims: %w", err)
	}
	signing := b64(h) + "." + b64(p)
	sig := ed25519.Sign(s.key, []byte(signing))
	return signing + "." + b64(sig), nil
}

// Verify checks the token's signature against the key its header names,
// checks that its type is into's type, decodes the claims into into and then
// runs into.Check at now.
//
// When the error is ErrExpired or ErrNotYetValid the signature was good and
// into holds the authentic claims; a receiver may still use them to answer an
// idempotent repeat of something it already accepted. For every other error
// into must be ignored.
func (ks *KeySet) Verify(token string, now time.Time, into Claims) error {
	if len(token) > MaxTokenBytes {
		return ErrMalformed
	}
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return ErrMalformed
	}
	hb, err := base64.RawURLEncoding.DecodeString(parts[0])
	if err != nil {
		return ErrMalformed
	}
	var h header
	if err := json.Unmarshal(hb, &h); err != nil || h.Alg != algEdDSA {
		return ErrMalformed
	}
	key, ok := ks.keys[h.Kid]
	if !ok {
		return ErrUnknownKey
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil || len(sig) != ed25519.SignatureSize {
		return ErrMalformed
	}
	if !ed25519.Verify(key, []byte(parts[0]+"."+parts[1]), sig) {
		return ErrBadSignature
	}
	if h.Typ != into.TokenType() {
		return ErrWrongType
	}
	pb, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return ErrMalformed
	}
	dec := json.NewDecoder(strings.NewReader(string(pb)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(into); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidClaims, err)
	}
	return into.Check(now, ks.skew())
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }
