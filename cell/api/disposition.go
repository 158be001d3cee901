package api

import (
	"fmt"
	"strings"
	"unicode"
)

// contentDisposition is the Content-Disposition of served asset content (RFC 6266): inline,
// with the asset's name reduced to a file name — no path (the part after the last / or \),
// no control or format characters, no leading dots — as an ASCII fallback filename= and the
// exact UTF-8 name in filename*=. A name with nothing left is "download".
func contentDisposition(name string) string {
	if i := strings.LastIndexAny(name, `/\`); i >= 0 {
		name = name[i+1:]
	}
	name = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == 0x2028 || r == 0x2029 {
			return -1
		}
		return r
	}, name)
	name = strings.TrimLeft(strings.TrimSpace(name), ".")
	if name == "" {
		name = "download"
	}
	ascii := strings.Map(func(r rune) rune {
		if r < 0x20 || r > 0x7e || r == '"' || r == '\\' || r == '%' || r == ';' {
			return '_'
		}
		return r
	}, name)
	return `inline; filename="` + ascii + `"; filename*=UTF-8''` + extValue(name)
}

// extValue percent-encodes s for an RFC 8187 ext-value: attr-char as it is, every other byte
// as %XX.
func extValue(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$&+-.^_`|~", c) >= 0 {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	return b.String()
}
