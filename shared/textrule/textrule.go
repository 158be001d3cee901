// Package textrule is the one rule for the names and titles people give things (projects,
// pages, components, styles, themes, assets, font families): text that shows on screens and in
// headers, so it must not hide or reorder what it shows.
//
// A name is refused when it holds a control character (U+0000–U+001F, U+007F–U+009F: CR, LF and
// tab included), a format character (Unicode Cf: the bidirectional overrides and isolates
// U+202A–U+202E and U+2066–U+2069, the marks U+200E, U+200F and U+061C, the zero-width
// characters U+200B–U+200D, U+2060 and U+FEFF, soft hyphen, …), a line or paragraph separator
// (U+2028, U+2029), a noncharacter (U+FDD0–U+FDEF, U+xFFFE, U+xFFFF), or is not valid UTF-8
// (never silently replaced). An accepted name is NFC-normalized; lengths count characters
// (code points) of the normalized text.
package textrule

import (
	"fmt"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// Name checks s and returns it NFC-normalized, or a message saying what is wrong (for a 422
// naming the field).
func Name(s string) (string, string) {
	if !utf8.ValidString(s) {
		return s, "must be valid UTF-8"
	}
	for _, r := range s {
		if msg := refused(r); msg != "" {
			return s, msg
		}
	}
	return norm.NFC.String(s), ""
}

// NameLen checks s as Name does and its length, 1 to max characters, not only white space.
func NameLen(s string, max int) (string, string) {
	n, msg := Name(s)
	switch {
	case msg != "":
		return n, msg
	case utf8.RuneCountInString(n) > max:
		return n, fmt.Sprintf("must be at most %d characters", max)
	case len(n) == 0 || isSpace(n):
		return n, "must not be empty or only white space"
	}
	return n, ""
}

func isSpace(s string) bool {
	for _, r := range s {
		if !unicode.IsSpace(r) {
			return false
		}
	}
	return true
}

func refused(r rune) string {
	switch {
	case unicode.IsControl(r):
		return fmt.Sprintf("must not contain control characters (U+%04X)", r)
	case r >= 0x202A && r <= 0x202E, r >= 0x2066 && r <= 0x2069, r == 0x200E, r == 0x200F, r == 0x061C:
		return fmt.Sprintf("must not contain bidirectional control characters (U+%04X)", r)
	case r >= 0x200B && r <= 0x200D, r == 0x2060, r == 0xFEFF:
		return fmt.Sprintf("must not contain zero-width characters (U+%04X)", r)
	case unicode.Is(unicode.Cf, r):
		return fmt.Sprintf("must not contain invisible format characters (U+%04X)", r)
	case r == 0x2028 || r == 0x2029:
		return fmt.Sprintf("must not contain line or paragraph separators (U+%04X)", r)
	case r >= 0xFDD0 && r <= 0xFDEF, r&0xFFFE == 0xFFFE:
		return fmt.Sprintf("must not contain noncharacters (U+%04X)", r)
	case r == utf8.RuneError:
		return "must be valid UTF-8"
	}
	return ""
}
