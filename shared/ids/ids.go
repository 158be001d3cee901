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

const alphabet = "abcdefghijklmnopqrstuvwxyz234567"

var encoding = base32.NewEncoding(alphabet).WithPadding(base32.NoPadding)

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
	for _, c := range []byte(s[len(prefix)+1:]) {
		if decodeMap[c] > 31 {
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

// Bytes returns the 128 bits of an ID of the given prefix, for tables that key by fixed-size
// values (the router's placement table). It accepts only the canonical spelling New makes: of
// the 130 bits the 26 characters carry, the last two must be zero. A Valid ID with other
// trailing bits names no object (no ID is ever made that way) but is a different string, so
// it is refused here rather than folded onto the canonical one. No allocation; on the router's
// path for every request, hence the unrolled decoding.
func Bytes(prefix, s string) (b [16]byte, ok bool) {
	if len(s) != len(prefix)+1+bodyLen || s[:len(prefix)] != prefix || s[len(prefix)] != '_' {
		return b, false
	}
	body := s[len(prefix)+1:]
	var bad byte       // any character outside the alphabet sets a bit above the low five
	for g := range 3 { // 3 × 8 characters → 15 bytes
		var v uint64
		for _, c := range []byte(body[g*8 : g*8+8]) {
			d := decodeMap[c]
			bad |= d
			v = v<<5 | uint64(d&31)
		}
		b[g*5], b[g*5+1], b[g*5+2], b[g*5+3], b[g*5+4] = byte(v>>32), byte(v>>24), byte(v>>16), byte(v>>8), byte(v)
	}
	d0, d1 := decodeMap[body[24]], decodeMap[body[25]]
	bad |= d0 | d1
	v := uint16(d0&31)<<5 | uint16(d1&31) // the 16th byte and 2 bits New leaves zero
	b[15] = byte(v >> 2)
	if bad&^31 != 0 || v&3 != 0 {
		return [16]byte{}, false
	}
	return b, true
}

// decodeMap gives a character's value in the alphabet, or 0xFF for any other byte.
var decodeMap = func() (m [256]byte) {
	for i := range m {
		m[i] = 0xFF
	}
	for i, c := range alphabet {
		m[c] = byte(i)
	}
	return m
}()
