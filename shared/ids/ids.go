// Package ids makes and checks the identifiers of every object: a short type prefix, an
// underscore and 128 random bits in lower-case base32 (26 characters).
//
// IDs are random on purpose: time-ordered or sequential keys make CockroachDB ranges hot.
package ids

import (
	"crypto/rand"
	"encoding/base32"
	"strings"
)

// Prefixes of the object types. A prefix is what Valid checks before any lookup.
const (
	Workspace  = "ws"
	User       = "usr"
	Token      = "tok"
	Project    = "prj"
	Page       = "pg"
	Component  = "cmp"
	Asset      = "ast"
	Theme      = "thm"
	Style      = "sty"
	Job        = "job"
	FontFamily = "ffam"
	FontFace   = "ffac"
	Request    = "req"
	Snapshot   = "snap"
	Render     = "rrq"
	Attempt    = "rat"
	Preview    = "prv"
	Move       = "mv"
)

var encoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// bodyLen is the length of the encoded 128-bit body.
const bodyLen = 26

// New returns a fresh random ID with the given prefix.
func New(prefix string) string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("ids: no randomness: " + err.Error())
	}
	var sb strings.Builder
	sb.Grow(len(prefix) + 1 + bodyLen)
	sb.WriteString(prefix)
	sb.WriteByte('_')
	var body [bodyLen]byte
	encoding.Encode(body[:], b[:])
	sb.Write(body[:])
	return sb.String() // one allocation: IDs are made on every request (trace IDs)
}

// Valid reports whether s is shaped like an ID of the given prefix.
func Valid(prefix, s string) bool {
	if len(s) != len(prefix)+1+bodyLen || !strings.HasPrefix(s, prefix) || s[len(prefix)] != '_' {
		return false
	}
	// bodyLen characters of the alphabet always decode (the last two carry the 16th byte), so
	// checking the characters is checking the decoding, without its allocation.
	for _, c := range s[len(prefix)+1:] {
		if !(c >= 'a' && c <= 'z' || c >= '2' && c <= '7') {
			return false
		}
	}
	return true
}

// CellIDValid reports whether s is a valid cell ID: 1–32 characters of a-z, 0-9 and '-',
// starting with a letter (cells are named by operators, e.g. "cell-a").
func CellIDValid(s string) bool {
	if len(s) == 0 || len(s) > 32 || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}
