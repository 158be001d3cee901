package compile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"golang.org/x/net/html"

	"slidecells/shared/digest"
)

// byReference are the elements that make a document load something by
// reference, or replace the page's base for relative URLs.
var byReference = map[string]bool{
	"link": true, "base": true, "iframe": true, "frame": true, "object": true, "embed": true, "portal": true,
}

// compileHTML checks an html page by the rules on Compile and returns it
// unchanged.
func compileHTML(req Request) *Result {
	const file = "page.html"
	src := req.Entry.Source
	res := &Result{Format: FormatHTML}
	diag := func(off int, code Code, msg string) {
		d := Diagnostic{File: file, Severity: SeverityError, Code: code, Message: msg}
		if off >= 0 {
			d.Line, d.Column = position(src, off)
		}
		res.Diagnostics = append(res.Diagnostics, d)
	}
	switch {
	case len(src) > req.Limits.MaxSourceBytes:
		diag(-1, CodeLimit, fmt.Sprintf("source is %d bytes; the limit is %d", len(src), req.Limits.MaxSourceBytes))
		return res
	case len(bytes.TrimSpace(src)) == 0:
		diag(-1, CodeSyntax, "the document is empty")
		return res
	}
	if i := invalidUTF8(src); i >= 0 {
		diag(i, CodeSyntax, "the document is not valid UTF-8")
		return res
	}
	if i := bytes.IndexByte(src, 0); i >= 0 {
		diag(i, CodeSyntax, "the document contains a NUL byte")
		return res
	}
	z := html.NewTokenizer(bytes.NewReader(src))
	off := 0
	for {
		tt := z.Next()
		if tt == html.ErrorToken {
			if err := z.Err(); !errors.Is(err, io.EOF) {
				diag(off, CodeSyntax, "the document does not tokenize: "+err.Error())
			}
			break
		}
		start := off
		off += len(z.Raw())
		if tt != html.StartTagToken && tt != html.SelfClosingTagToken {
			continue
		}
		name, hasAttr := z.TagName()
		tag := string(name)
		attrs := map[string]string{}
		for hasAttr {
			var k, v []byte
			k, v, hasAttr = z.TagAttr()
			attrs[string(k)] = string(v)
		}
		switch {
		case byReference[tag]:
			diag(start, CodeImportForbidden, fmt.Sprintf("<%s> is forbidden: html pages load nothing by reference", tag))
		case tag == "script":
			if _, ok := attrs["src"]; ok {
				diag(start, CodeImportForbidden, "<script src> is forbidden: html pages load no scripts by reference")
			} else if strings.EqualFold(strings.TrimSpace(attrs["type"]), "module") {
				diag(start, CodeImportForbidden, "<script type=\"module\"> is forbidden: html pages import nothing")
			}
		}
	}
	if len(res.Diagnostics) == 0 {
		res.Code = src
		res.Digest = digest.Bytes(src)
	}
	return res
}

func invalidUTF8(b []byte) int {
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size == 1 {
			return i
		}
		i += size
	}
	return -1
}

// position is the 1-based line and 1-based UTF-16 column of byte offset off
// in src. Lines end at \n, \r\n or a lone \r, as in HTML.
func position(src []byte, off int) (line, col int) {
	line, col = 1, 1
	if off > len(src) {
		off = len(src)
	}
	for i := 0; i < off; {
		r, size := utf8.DecodeRune(src[i:])
		switch {
		case r == '\n':
			line, col = line+1, 1
		case r == '\r':
			if i+1 < len(src) && src[i+1] == '\n' {
				i++
			}
			line, col = line+1, 1
		default:
			col += len(utf16.Encode([]rune{r}))
		}
		i += size
	}
	return line, col
}
