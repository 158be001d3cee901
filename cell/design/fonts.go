package design

import (
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	cblob "slidecells/cell/blob"
	"slidecells/shared/problem"
)

// MaxFamilyName caps a font family name, in characters.
const MaxFamilyName = 100

// FontFormats maps the content types of font assets (cblob.FontTypes, sniffed at upload) to
// the CSS format() hint of @font-face.
var FontFormats = map[string]string{
	cblob.TypeWOFF2: "woff2",
	cblob.TypeWOFF:  "woff",
	cblob.TypeTTF:   "truetype",
	cblob.TypeOTF:   "opentype",
}

func FontWeightText(min, max int) string {
	if min == max {
		return strconv.Itoa(min)
	}
	return strconv.Itoa(min) + " " + strconv.Itoa(max)
}

var badFamilyChars = regexp.MustCompile(`[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]`)

// CheckFamilyName trims a family name and reports what is wrong with it, if anything.
func CheckFamilyName(name string) (string, string) {
	name = strings.TrimSpace(name)
	switch {
	case name == "":
		return name, "must not be empty"
	case utf8.RuneCountInString(name) > MaxFamilyName:
		return name, fmt.Sprintf("must be at most %d characters", MaxFamilyName)
	case badFamilyChars.MatchString(name):
		return name, "must not contain control or format characters"
	}
	return name, ""
}

// ParseFontWeight reads "400" or "100 900".
func ParseFontWeight(s string) (min, max int, msg string) {
	parts := strings.Split(s, " ")
	if len(parts) > 2 {
		return 0, 0, `must be one weight ("400") or two separated by one space ("100 900")`
	}
	var w [2]int
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || p == "" || p[0] == '+' || p[0] == '-' {
			return 0, 0, `must be one weight ("400") or two separated by one space ("100 900")`
		}
		if n < 1 || n > 1000 {
			return 0, 0, fmt.Sprintf("weight %d is outside 1..1000", n)
		}
		w[i] = n
	}
	if len(parts) == 1 {
		return w[0], w[0], ""
	}
	if w[0] > w[1] {
		return 0, 0, fmt.Sprintf("the range minimum %d is above its maximum %d", w[0], w[1])
	}
	return w[0], w[1], ""
}

var unicodeRangeToken = regexp.MustCompile(`^[uU]\+([0-9a-fA-F?]{1,6})(?:-([0-9a-fA-F]{1,6}))?$`)

// maxUnicodeRanges caps the ranges of one face.
const maxUnicodeRanges = 64

// ParseUnicodeRange validates a CSS unicode-range list and returns it normalised (upper case,
// ", " separated); "" stays "".
func ParseUnicodeRange(s string) (string, string) {
	s = strings.TrimSpace(s)
	if s == "" {
		return "", ""
	}
	tokens := strings.Split(s, ",")
	if len(tokens) > maxUnicodeRanges {
		return "", fmt.Sprintf("at most %d ranges", maxUnicodeRanges)
	}
	out := make([]string, 0, len(tokens))
	for _, tok := range tokens {
		tok = strings.TrimSpace(tok)
		m := unicodeRangeToken.FindStringSubmatch(tok)
		if m == nil {
			return "", fmt.Sprintf("%q is not a range of the form U+XXXX, U+XXXX-YYYY or U+4??", tok)
		}
		start, end := strings.ToUpper(m[1]), strings.ToUpper(m[2])
		if q := strings.IndexByte(start, '?'); q >= 0 {
			if end != "" || strings.Trim(start[q:], "?") != "" {
				return "", fmt.Sprintf("%q: wildcards (?) may only end a single value", tok)
			}
			lo, _ := strconv.ParseUint(strings.ReplaceAll(start, "?", "0"), 16, 32)
			hi, _ := strconv.ParseUint(strings.ReplaceAll(start, "?", "F"), 16, 32)
			if lo > unicode.MaxRune || hi > unicode.MaxRune {
				return "", fmt.Sprintf("%q goes beyond U+10FFFF", tok)
			}
			out = append(out, "U+"+start)
			continue
		}
		lo, _ := strconv.ParseUint(start, 16, 32)
		if lo > unicode.MaxRune {
			return "", fmt.Sprintf("%q goes beyond U+10FFFF", tok)
		}
		if end == "" {
			out = append(out, "U+"+start)
			continue
		}
		hi, _ := strconv.ParseUint(end, 16, 32)
		if hi > unicode.MaxRune {
			return "", fmt.Sprintf("%q goes beyond U+10FFFF", tok)
		}
		if lo > hi {
			return "", fmt.Sprintf("%q starts after it ends", tok)
		}
		out = append(out, "U+"+start+"-"+end)
	}
	return strings.Join(out, ", "), ""
}

func FontTypeList() string {
	out := append([]string(nil), cblob.FontTypes...)
	sort.Strings(out)
	return strings.Join(out, ", ")
}

// CSSString quotes s as a CSS string. Characters that could end the string, the declaration
// or an enclosing <style> element are escaped.
func CSSString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '<' || r == '>' || r == '&' || r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, "\\%x ", r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// FontBundleCSS renders the @font-face rules of a family's enabled faces, ordered by weight,
// style and ID. A face whose asset is no longer a live font is left out with a comment.
// files holds the family's live assets by ID (an absent one is not live): their content type
// and their immutable content address.
func FontBundleCSS(m FontFamily, files map[string]FontFile) []byte {
	faces := append([]FontFace(nil), m.Faces...)
	sort.SliceStable(faces, func(i, j int) bool {
		a, b := faces[i], faces[j]
		if a.WeightMin != b.WeightMin {
			return a.WeightMin < b.WeightMin
		}
		if a.WeightMax != b.WeightMax {
			return a.WeightMax < b.WeightMax
		}
		if a.Style != b.Style {
			return a.Style < b.Style
		}
		return a.ID < b.ID
	})
	var b strings.Builder
	fmt.Fprintf(&b, "/* font family %s: enabled faces */\n", m.ID)
	for _, f := range faces {
		if !f.Enabled {
			continue
		}
		a, live := files[f.AssetID]
		format, ok := FontFormats[a.ContentType]
		if !live || !ok {
			fmt.Fprintf(&b, "/* face %s left out: its asset is not a live font */\n", f.ID)
			continue
		}
		fmt.Fprintf(&b, "@font-face {\n  font-family: %s;\n  src: url(%s) format(%s);\n  font-weight: %s;\n  font-style: %s;\n  font-display: %s;\n",
			CSSString(m.Name), CSSString(a.URL), CSSString(format),
			FontWeightText(f.WeightMin, f.WeightMax), f.Style, f.Display)
		if f.UnicodeRange != "" {
			fmt.Fprintf(&b, "  unicode-range: %s;\n", f.UnicodeRange)
		}
		b.WriteString("}\n")
	}
	return []byte(b.String())
}

// FontFile is a live font asset as a bundle references it: its content type and its URL.
type FontFile struct {
	ContentType string
	URL         string
}

// FaceErr answers a face whose asset is not a live font asset at body.asset_id; other errors
// stay as they are.
func FaceErr(err error) error {
	var fa *FaceAssetError
	switch {
	case !errors.As(err, &fa):
		return err
	case fa.Missing:
		return problem.Invalid(problem.FieldError{Field: "asset_id", Message: "no asset with this ID in the workspace"})
	default:
		return problem.Invalid(problem.FieldError{Field: "asset_id", Message: fmt.Sprintf("the asset is %s, not a font (%s)", fa.ContentType, FontTypeList())})
	}
}

// FaceDescriptors are a face's descriptors as a request gives them; nil fields are absent.
type FaceDescriptors struct {
	FamilyName   *string
	FontWeight   *string // "400" or "100 900"
	FontStyle    *string
	FontDisplay  *string
	UnicodeRange *string
	Enabled      *bool
}

// Check validates the descriptors into a patch, collecting field errors. font_style and
// font_display are enumerations the request schema already restricts.
func (d FaceDescriptors) Check() (FontFacePatch, []problem.FieldError) {
	var p FontFacePatch
	var errs []problem.FieldError
	if d.FamilyName != nil {
		name, msg := CheckFamilyName(*d.FamilyName)
		if msg != "" {
			errs = append(errs, problem.FieldError{Field: "family_name", Message: msg})
		}
		p.FamilyName = &name
	}
	if d.FontWeight != nil {
		lo, hi, msg := ParseFontWeight(*d.FontWeight)
		if msg != "" {
			errs = append(errs, problem.FieldError{Field: "font_weight", Message: msg})
		} else {
			p.WeightMin, p.WeightMax = &lo, &hi
		}
	}
	if d.UnicodeRange != nil {
		r, msg := ParseUnicodeRange(*d.UnicodeRange)
		if msg != "" {
			errs = append(errs, problem.FieldError{Field: "unicode_range", Message: msg})
		} else {
			p.UnicodeRange = &r
		}
	}
	p.Style, p.Display, p.Enabled = d.FontStyle, d.FontDisplay, d.Enabled
	return p, errs
}

// NewFace is the face a create makes: the defaults (400, normal, swap, enabled) laid under the
// checked descriptors.
func (d FaceDescriptors) NewFace(assetID string) (FontFaceInput, error) {
	p, errs := d.Check()
	if len(errs) > 0 {
		return FontFaceInput{}, problem.Invalid(errs...)
	}
	f := FontFaceInput{FamilyName: *p.FamilyName, FaceFields: FaceFields{AssetID: assetID, WeightMin: 400, WeightMax: 400,
		Style: "normal", Display: "swap", Enabled: true}}
	if p.WeightMin != nil {
		f.WeightMin, f.WeightMax = *p.WeightMin, *p.WeightMax
	}
	set := func(dst *string, v *string) {
		if v != nil {
			*dst = *v
		}
	}
	set(&f.Style, p.Style)
	set(&f.Display, p.Display)
	set(&f.UnicodeRange, p.UnicodeRange)
	if p.Enabled != nil {
		f.Enabled = *p.Enabled
	}
	return f, nil
}
