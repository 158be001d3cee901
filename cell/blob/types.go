// Package blob stores the bytes of a cell's assets in its blob store (gocloud.dev/blob:
// fileblob locally, s3blob in production) under content-addressed keys, and decides what the
// bytes are: the media type is sniffed from the content and checked against one allow-list.
//
// Keys. Content lives at ws/<workspace_id>/sha256/<hex>. The digest makes a key name exactly
// one content, so a key is written once and never overwritten, a row can share its blob with
// copies, and a replaced asset's old bytes stay readable. The workspace prefix is deliberate:
// a workspace move copies and verifies one prefix, deduplication never crosses tenants (the
// presence of a blob cannot tell one workspace anything about another), and a workspace's bytes
// can be accounted for or removed as a unit.
//
// Writes. Put streams the body to a temporary key (tmp/<workspace_id>/<random>) while hashing
// and counting it, then promotes it to the final key with a create-if-absent write
// (WriterOptions.IfNotExist, a real precondition on S3, GCS, Azure, file and mem buckets): a
// final key that exists already holds, by definition, the same bytes, and is left untouched.
// Nothing but a temporary key is written before the size limit, the type check and (for SVG)
// the active-content check have passed; temporary keys are deleted on every path, and
// SweepTemp removes those a crashed process left behind.
//
// This package never deletes a final key and never reads or writes the database.
package blob

import (
	"bytes"
	"net/http"
	"sort"
	"strings"
)

// MaxBytes is the size limit of one asset's content (uploads, replacements and font files). It
// is enforced while the body is read; one byte more is a 413 and nothing is stored.
const MaxBytes int64 = 25 << 20

// Media types on the allow-list, in their canonical spelling (the one stored and served).
const (
	TypePNG   = "image/png"
	TypeJPEG  = "image/jpeg"
	TypeGIF   = "image/gif"
	TypeWebP  = "image/webp"
	TypeAVIF  = "image/avif"
	TypeSVG   = "image/svg+xml"
	TypeWOFF2 = "font/woff2"
	TypeWOFF  = "font/woff"
	TypeTTF   = "font/ttf"
	TypeOTF   = "font/otf"
	TypePDF   = "application/pdf"
)

// Kind groups media types by what the content is for. A content replacement keeps its kind, so
// a font asset never silently turns into an image.
type Kind string

// Kinds of content.
const (
	KindImage    Kind = "image"
	KindFont     Kind = "font"
	KindDocument Kind = "document"
)

var allowed = map[string]Kind{
	TypePNG: KindImage, TypeJPEG: KindImage, TypeGIF: KindImage, TypeWebP: KindImage, TypeAVIF: KindImage, TypeSVG: KindImage,
	TypeWOFF2: KindFont, TypeWOFF: KindFont, TypeTTF: KindFont, TypeOTF: KindFont,
	TypePDF: KindDocument,
}

// FontTypes are the media types of font files, for callers that accept only fonts.
var FontTypes = []string{TypeWOFF2, TypeWOFF, TypeTTF, TypeOTF}

// KindOf returns the kind of an allowed canonical media type, or "" when it is not allowed.
func KindOf(contentType string) Kind { return allowed[contentType] }

// TypesOf lists the allowed media types of a kind, sorted.
func TypesOf(k Kind) []string {
	var out []string
	for t, kk := range allowed {
		if kk == k {
			out = append(out, t)
		}
	}
	sort.Strings(out)
	return out
}

// AllowedTypes lists the whole allow-list, sorted.
func AllowedTypes() []string {
	out := make([]string, 0, len(allowed))
	for t := range allowed {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

// aliases are other spellings clients send for allowed types.
var aliases = map[string]string{
	"image/jpg": TypeJPEG, "image/pjpeg": TypeJPEG,
	"image/svg":              TypeSVG,
	"application/font-woff2": TypeWOFF2, "application/x-font-woff2": TypeWOFF2,
	"application/font-woff": TypeWOFF, "application/x-font-woff": TypeWOFF,
	"application/x-font-ttf": TypeTTF, "application/x-font-truetype": TypeTTF, "font/sfnt": TypeTTF,
	"application/font-sfnt": TypeTTF, "font/truetype": TypeTTF,
	"application/x-font-opentype": TypeOTF, "application/vnd.ms-opentype": TypeOTF, "font/opentype": TypeOTF,
	"application/x-pdf": TypePDF,
}

// Normalize lower-cases a declared media type, drops its parameters and maps known aliases to
// the canonical spelling.
func Normalize(declared string) string {
	t, _, _ := strings.Cut(declared, ";")
	t = strings.ToLower(strings.TrimSpace(t))
	if a, ok := aliases[t]; ok {
		return a
	}
	return t
}

// Generic reports whether a declared type says nothing about the content ("" or
// application/octet-stream): then the sniffed type alone decides.
func Generic(declared string) bool {
	t := Normalize(declared)
	return t == "" || t == "application/octet-stream"
}

// Compatible reports whether content sniffed as sniffed may be stored under the declared type.
// TrueType and OpenType (font/ttf, font/otf) are accepted for each other: an OpenType file with
// TrueType outlines starts like a .ttf and is named either way in the wild.
func Compatible(declared, sniffed string) bool {
	d := Normalize(declared)
	if Generic(d) || d == sniffed {
		return true
	}
	sfnt := func(t string) bool { return t == TypeTTF || t == TypeOTF }
	return sfnt(d) && sfnt(sniffed)
}

// SniffLen is how many leading bytes Sniff looks at (more than http.DetectContentType's 512 so
// an SVG behind a long XML prolog or comment is still recognized).
const SniffLen = 4096

// Sniff returns the media type of content from its first bytes, without parameters: the
// canonical allow-list spelling where the content is one of those, otherwise whatever
// net/http.DetectContentType says (e.g. text/plain, application/octet-stream). It adds the
// signatures DetectContentType misses: Apple TrueType ("true"), AVIF and SVG.
func Sniff(head []byte) string {
	switch {
	case bytes.HasPrefix(head, []byte("wOF2")):
		return TypeWOFF2
	case bytes.HasPrefix(head, []byte("wOFF")):
		return TypeWOFF
	case bytes.HasPrefix(head, []byte("\x00\x01\x00\x00")), bytes.HasPrefix(head, []byte("true")):
		return TypeTTF
	case bytes.HasPrefix(head, []byte("OTTO")):
		return TypeOTF
	case len(head) >= 12 && string(head[4:8]) == "ftyp" && (string(head[8:12]) == "avif" || string(head[8:12]) == "avis"):
		return TypeAVIF
	}
	n := min(len(head), 512)
	t, _, _ := strings.Cut(http.DetectContentType(head[:n]), ";")
	t = strings.TrimSpace(t)
	switch t {
	case "text/xml", "text/plain", "text/html", "application/xml":
		if looksLikeSVG(head) {
			return TypeSVG
		}
	}
	return t
}

// looksLikeSVG reports whether the first element of an XML document is <svg>, skipping a byte
// order mark, white space, the XML declaration, comments, processing instructions and a
// DOCTYPE. The whole document is checked later (svgCheck); this only recognizes it.
func looksLikeSVG(b []byte) bool {
	b = bytes.TrimPrefix(b, []byte("\xEF\xBB\xBF"))
	for {
		b = bytes.TrimLeft(b, " \t\r\n")
		switch {
		case bytes.HasPrefix(b, []byte("<?")):
			i := bytes.Index(b, []byte("?>"))
			if i < 0 {
				return false
			}
			b = b[i+2:]
		case bytes.HasPrefix(b, []byte("<!--")):
			i := bytes.Index(b[4:], []byte("-->"))
			if i < 0 {
				return false
			}
			b = b[4+i+3:]
		case len(b) >= 9 && strings.EqualFold(string(b[:9]), "<!doctype"):
			i := bytes.IndexByte(b, '>')
			if i < 0 || bytes.IndexByte(b[:i], '[') >= 0 {
				return false // no internal DTD subsets
			}
			b = b[i+1:]
		default:
			if !bytes.HasPrefix(b, []byte("<svg")) || len(b) < 5 {
				return false
			}
			switch b[4] {
			case ' ', '\t', '\r', '\n', '>', '/':
				return true
			}
			return false
		}
	}
}
