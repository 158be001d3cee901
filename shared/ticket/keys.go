package ticket

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
)

// DefaultMaxClockSkew is how far in the future a token's issue time may lie
// before it is refused as not yet valid. Expiry is never stretched by it:
// an expired admission ticket must not start a browser.
const DefaultMaxClockSkew = 5 * time.Second

// maxKeyIDLen bounds key IDs so a header cannot carry an unbounded lookup key.
const maxKeyIDLen = 64

// PublicKey is one verification key with its key ID.
type PublicKey struct {
	ID  string
	Key ed25519.PublicKey
}

// String encodes the key as "kid:base64" for configuration.
func (k PublicKey) String() string {
	return k.ID + ":" + base64.StdEncoding.EncodeToString(k.Key)
}

// ParsePublicKey decodes "kid:base64".
func ParsePublicKey(s string) (PublicKey, error) {
	kid, raw, err := splitKey(s)
	if err != nil {
		return PublicKey{}, err
	}
	if len(raw) != ed25519.PublicKeySize {
		return PublicKey{}, fmt.Errorf("ticket: key %q: public key must be %d bytes, got %d", kid, ed25519.PublicKeySize, len(raw))
	}
	return PublicKey{ID: kid, Key: ed25519.PublicKey(raw)}, nil
}

// KeySet holds the public keys a verifier accepts, by key ID. Several keys
// make rotation possible without a flag day. A KeySet is immutable after
// construction and safe for concurrent use.
type KeySet struct {
	keys map[string]ed25519.PublicKey
	// MaxClockSkew is the tolerance for issue times in the future; zero
	// means DefaultMaxClockSkew.
	MaxClockSkew time.Duration
}

// NewKeySet builds a key set. Duplicate key IDs are refused because a
// verifier could not tell which key a token names.
func NewKeySet(keys ...PublicKey) (*KeySet, error) {
	if len(keys) == 0 {
		return nil, errors.New("ticket: key set is empty")
	}
	ks := &KeySet{keys: make(map[string]ed25519.PublicKey, len(keys))}
	for _, k := range keys {
		if err := checkKeyID(k.ID); err != nil {
			return nil, err
		}
		if len(k.Key) != ed25519.PublicKeySize {
			return nil, fmt.Errorf("ticket: key %q has the wrong size", k.ID)
		}
		if _, dup := ks.keys[k.ID]; dup {
			return nil, fmt.Errorf("ticket: duplicate key ID %q", k.ID)
		}
		ks.keys[k.ID] = append(ed25519.PublicKey(nil), k.Key...)
	}
	return ks, nil
}

// ParseKeySet decodes a comma-separated list of "kid:base64" public keys.
func ParseKeySet(s string) (*KeySet, error) {
	var keys []PublicKey
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		k, err := ParsePublicKey(part)
		if err != nil {
			return nil, err
		}
		keys = append(keys, k)
	}
	return NewKeySet(keys...)
}

// KeyIDs lists the key IDs in sorted order.
func (ks *KeySet) KeyIDs() []string {
	ids := make([]string, 0, len(ks.keys))
	for id := range ks.keys {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// String encodes the set in the form ParseKeySet reads.
func (ks *KeySet) String() string {
	parts := make([]string, 0, len(ks.keys))
	for _, id := range ks.KeyIDs() {
		parts = append(parts, PublicKey{ID: id, Key: ks.keys[id]}.String())
	}
	return strings.Join(parts, ",")
}

func (ks *KeySet) skew() time.Duration {
	if ks.MaxClockSkew > 0 {
		return ks.MaxClockSkew
	}
	return DefaultMaxClockSkew
}

// Signer signs tokens with one private key. It never prints its key: String
// and the fmt verbs show the key ID only.
type Signer struct {
	kid string
	key ed25519.PrivateKey
}

// NewSigner wraps an existing private key.
func NewSigner(kid string, key ed25519.PrivateKey) (*Signer, error) {
	if err := checkKeyID(kid); err != nil {
		return nil, err
	}
	if len(key) != ed25519.PrivateKeySize {
		return nil, errors.New("ticket: private key has the wrong size")
	}
	return &Signer{kid: kid, key: key}, nil
}

// GenerateSigner creates a new random key under kid.
func GenerateSigner(kid string) (*Signer, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("ticket: generate key: %w", err)
	}
	return NewSigner(kid, priv)
}

// ParseSigner decodes "kid:base64(seed)", the form EncodePrivate writes.
func ParseSigner(s string) (*Signer, error) {
	kid, raw, err := splitKey(strings.TrimSpace(s))
	if err != nil {
		return nil, err
	}
	if len(raw) != ed25519.SeedSize {
		return nil, fmt.Errorf("ticket: key %q: private seed must be %d bytes", kid, ed25519.SeedSize)
	}
	return NewSigner(kid, ed25519.NewKeyFromSeed(raw))
}

// KeyID is the ID placed in every token header.
func (s *Signer) KeyID() string { return s.kid }

// PublicKey returns the verification key to publish in key sets.
func (s *Signer) PublicKey() PublicKey {
	return PublicKey{ID: s.kid, Key: s.key.Public().(ed25519.PublicKey)}
}

// EncodePrivate returns "kid:base64(seed)" for a secret store. Treat the
// result as a secret.
func (s *Signer) EncodePrivate() string {
	return s.kid + ":" + base64.StdEncoding.EncodeToString(s.key.Seed())
}

// String shows the key ID only, so a Signer in a log line leaks nothing.
func (s *Signer) String() string { return "ticket.Signer(" + s.kid + ")" }

func splitKey(s string) (string, []byte, error) {
	kid, b64, ok := strings.Cut(s, ":")
	if !ok {
		return "", nil, errors.New(`ticket: key must look like "kid:base64"`)
	}
	if err := checkKeyID(kid); err != nil {
		return "", nil, err
	}
	raw, err := decodeBase64(strings.TrimSpace(b64))
	if err != nil {
		return "", nil, fmt.Errorf("ticket: key %q: %w", kid, err)
	}
	return kid, raw, nil
}

// decodeBase64 accepts padded or unpadded, standard or URL alphabets because
// keys are pasted into environment variables by hand.
func decodeBase64(s string) ([]byte, error) {
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			return b, nil
		}
	}
	return nil, errors.New("not valid base64")
}

func checkKeyID(kid string) error {
	if kid == "" || len(kid) > maxKeyIDLen {
		return fmt.Errorf("ticket: key ID must be 1 to %d characters", maxKeyIDLen)
	}
	for _, c := range kid {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return fmt.Errorf("ticket: key ID %q may hold only letters, digits, '-', '_' and '.'", kid)
		}
	}
	return nil
}
