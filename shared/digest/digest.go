package digest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Prefix names the hash algorithm inside a digest string. It is part of the
// value so that a future algorithm change cannot be mistaken for a mismatch of
// content.
const Prefix = "sha256:"

// ErrMalformed reports a string that is not a digest of the form
// "sha256:<64 lower-case hex digits>".
var ErrMalformed = errors.New("digest: malformed digest")

// Bytes returns the digest of b.
func Bytes(b []byte) string {
	sum := sha256.Sum256(b)
	return Prefix + hex.EncodeToString(sum[:])
}

// FromSum formats an already computed SHA-256 sum, as produced by a streaming
// hash.Hash, as a digest string.
func FromSum(sum []byte) string {
	return Prefix + hex.EncodeToString(sum)
}

// JSON returns the digest of the canonical JSON encoding of v.
func JSON(v any) (string, error) {
	b, err := Canonical(v)
	if err != nil {
		return "", err
	}
	return Bytes(b), nil
}

// Canonical encodes v as canonical JSON. Struct field order and map order in
// Go do not matter: the value is encoded once with encoding/json, decoded into
// generic values with numbers kept as literals, and encoded again, which sorts
// every object's keys.
func Canonical(v any) ([]byte, error) {
	first, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("digest: encode: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(first))
	dec.UseNumber()
	var generic any
	if err := dec.Decode(&generic); err != nil {
		return nil, fmt.Errorf("digest: re-decode: %w", err)
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	// HTML escaping would make "<" hash differently from other JSON writers.
	enc.SetEscapeHTML(false)
	if err := enc.Encode(generic); err != nil {
		return nil, fmt.Errorf("digest: encode canonical: %w", err)
	}
	return bytes.TrimSuffix(out.Bytes(), []byte("\n")), nil
}

// Valid reports whether s has the shape of a digest.
func Valid(s string) bool {
	hexPart, ok := strings.CutPrefix(s, Prefix)
	if !ok || len(hexPart) != sha256.Size*2 {
		return false
	}
	for i := 0; i < len(hexPart); i++ {
		c := hexPart[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// Check returns ErrMalformed when s is not a digest.
func Check(s string) error {
	if !Valid(s) {
		return ErrMalformed
	}
	return nil
}
