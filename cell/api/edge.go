package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"slidecells/shared/problem"
	"slidecells/shared/textrule"
)

// The request's edge checks, run by the pipeline for every operation before its handler, once
// for all fields (issue #27): what no operation may receive.
//
//   - A declared Content-Length over the operation's body limit is 413 before the body is read
//     (with Expect: 100-continue the client is never told to send it).
//   - A body sent to an operation that takes JSON needs Content-Type application/json (or
//     application/…+json): missing or anything else is 415.
//   - Two different Idempotency-Key headers are 422.
//   - No text may hold U+0000: not a path value, a query parameter (name or value), nor any
//     string (key or value) of a JSON body; nor may a JSON string hold invalid UTF-8 or an
//     unpaired surrogate escape (\ud800 alone), which a decoder would silently replace. 422
//     with the field's path (body.name, body.items[0].title, query.cursor, path.page_id).

// SourceBodyBytes caps the body of an operation that carries a page or component source
// (3 MiB + 64 KiB = 3,211,264 bytes): the documented source limit, 512 KiB of UTF-8, is what
// counts (checked on the decoded source), and a client that escapes every byte as \u00XX
// (six bytes each) can still send a source of that size.
const SourceBodyBytes = 6*(512<<10) + 64<<10

// MaxJSONDepth bounds how deep any JSON body nests (objects and arrays); free-form fields have
// tighter bounds of their own (asset metadata: content.MaxMetadataDepth).
const MaxJSONDepth = 32

// jsonDepth is the deepest nesting of objects and arrays in body (strings skipped).
func jsonDepth(body []byte) int {
	depth, deepest, inString := 0, 0, false
	for i := 0; i < len(body); i++ {
		c := body[i]
		switch {
		case inString && c == '\\':
			i++
		case inString:
			inString = c != '"'
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			depth++
			deepest = max(deepest, depth)
		case c == '}' || c == ']':
			depth--
		}
	}
	return deepest
}

// edgeCheck runs the edge checks; the body, when it was read, is put back on r.
func (s *Server) edgeCheck(r *http.Request, op Operation) error {
	limit := op.MaxBodyBytes
	if limit <= 0 {
		limit = DefaultMaxBodyBytes
	}
	if r.ContentLength > limit {
		return problem.New(problem.PayloadTooLarge, "the request body is larger than %d bytes", limit)
	}
	if keys := r.Header.Values("Idempotency-Key"); len(keys) > 1 {
		for _, k := range keys[1:] {
			if k != keys[0] {
				return problem.Invalid(problem.FieldError{Field: "header.Idempotency-Key", Message: "sent more than once with different values; send one key"})
			}
		}
	}
	var fields []problem.FieldError
	for _, m := range pathParam.FindAllStringSubmatch(op.Path, -1) {
		if strings.IndexByte(r.PathValue(m[1]), 0) >= 0 {
			fields = append(fields, problem.FieldError{Field: "path." + m[1], Message: "must not contain U+0000 (NUL)"})
		}
	}
	if r.URL.RawQuery != "" {
		q, err := parseQueryStrict(r.URL.RawQuery)
		if err != nil {
			fields = append(fields, problem.FieldError{Field: "query", Message: "the query string is malformed"})
		}
		for _, kv := range q {
			switch {
			case strings.IndexByte(kv[0], 0) >= 0:
				fields = append(fields, problem.FieldError{Field: "query", Message: "a parameter name contains U+0000 (NUL)"})
			case strings.IndexByte(kv[1], 0) >= 0:
				fields = append(fields, problem.FieldError{Field: "query." + kv[0], Message: "must not contain U+0000 (NUL)"})
			case !utf8.ValidString(kv[0]) || !utf8.ValidString(kv[1]):
				fields = append(fields, problem.FieldError{Field: "query." + strings.ToValidUTF8(kv[0], "?"), Message: "must be valid UTF-8"})
			}
		}
	}
	if len(fields) > 0 {
		return problem.Invalid(fields...)
	}
	if op.RawBody != nil || !s.jsonBody[op.ID] || !hasBody(r) {
		return nil
	}
	if !isJSONMediaType(r.Header.Get("Content-Type")) {
		return problem.New(problem.UnsupportedMediaType, "this operation takes a JSON body: send Content-Type: application/json")
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		return bodyReadError(err)
	}
	if int64(len(body)) > limit {
		return problem.New(problem.PayloadTooLarge, "the request body is larger than %d bytes", limit)
	}
	if jsonDepth(body) > MaxJSONDepth {
		r.Body = io.NopCloser(bytes.NewReader(body))
		return problem.Invalid(problem.FieldError{Field: "body", Message: fmt.Sprintf("nests deeper than %d levels", MaxJSONDepth)})
	}
	body, f := scanJSONText(body, s.nameFields(op))
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	if f != nil {
		return problem.Invalid(*f)
	}
	return nil
}

// bodyReadError is the answer to a body that could not be read: 408 when its read deadline
// passed, 400 otherwise.
func bodyReadError(err error) error {
	var ne interface{ Timeout() bool }
	if errors.As(err, &ne) && ne.Timeout() {
		return &problem.Error{Code: problem.BadRequest, Status: http.StatusRequestTimeout, Message: "the request body was not received in time"}
	}
	return problem.New(problem.BadRequest, "the request body could not be read")
}

func hasBody(r *http.Request) bool {
	return r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0
}

// isJSONMediaType reports whether ct is application/json or application/…+json (parameters
// allowed).
func isJSONMediaType(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return false
	}
	return mt == "application/json" || strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json")
}

// parseQueryStrict splits a raw query into decoded name/value pairs, in order.
func parseQueryStrict(raw string) ([][2]string, error) {
	var out [][2]string
	var firstErr error
	for part := range strings.SplitSeq(raw, "&") {
		if part == "" {
			continue
		}
		k, v, _ := strings.Cut(part, "=")
		dk, err1 := queryUnescape(k)
		dv, err2 := queryUnescape(v)
		if err := errors.Join(err1, err2); err != nil && firstErr == nil {
			firstErr = err
		}
		out = append(out, [2]string{dk, dv})
	}
	return out, firstErr
}

func queryUnescape(s string) (string, error) {
	s = strings.ReplaceAll(s, "+", " ")
	if !strings.Contains(s, "%") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i+2 >= len(s) {
			return b.String(), errors.New("bad escape")
		}
		n, err := strconv.ParseUint(s[i+1:i+3], 16, 8)
		if err != nil {
			return b.String(), errors.New("bad escape")
		}
		b.WriteByte(byte(n))
		i += 2
	}
	return b.String(), nil
}

// scanJSONText finds the first JSON string (key or value) of body that holds U+0000, invalid
// UTF-8 or an unpaired surrogate escape (nothing when body is not JSON: the decoder answers for
// it), and checks the strings at names (paths with array indexes written [], e.g.
// body.pages[].title) by the name rule (textrule). It returns body with those NFC-normalized,
// or the first field at fault. A body without a backslash-u escape, with valid UTF-8 and no
// name path is passed at once.
func scanJSONText(body []byte, names map[string]bool) ([]byte, *problem.FieldError) {
	if len(names) == 0 && utf8.Valid(body) && !bytes.Contains(body, []byte(`\u`)) {
		return body, nil
	}
	out := body
	var splices []splice
	d := json.NewDecoder(bytes.NewReader(body))
	type frame struct {
		array bool
		index int
		key   string
	}
	var stack []frame
	expectKey := false
	// path names the current value; of its container only when a key is at fault. pattern
	// writes array indexes as [].
	path := func(container, pattern bool) string {
		var b strings.Builder
		b.WriteString("body")
		for i, f := range stack {
			switch {
			case f.array && pattern:
				b.WriteString("[]")
			case f.array:
				b.WriteString("[" + strconv.Itoa(f.index) + "]")
			case container && i == len(stack)-1:
			case f.key != "":
				b.WriteString("." + f.key)
			}
		}
		return b.String()
	}
	// after a value inside a container: the array's index moves on; an object expects a key.
	afterValue := func() {
		if len(stack) == 0 {
			return
		}
		if top := &stack[len(stack)-1]; top.array {
			top.index++
		} else {
			expectKey = true
		}
	}
	for {
		start := d.InputOffset()
		tok, err := d.Token()
		if err != nil {
			break // the end, or not JSON: the decoder answers for it
		}
		end := d.InputOffset()
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{':
				stack = append(stack, frame{})
				expectKey = true
			case '[':
				stack = append(stack, frame{array: true})
				expectKey = false
			default:
				stack = stack[:len(stack)-1]
				afterValue()
			}
		case string:
			raw := body[start:end]
			if q := bytes.IndexByte(raw, '"'); q >= 0 {
				raw = raw[q:]
			}
			isKey := expectKey && len(stack) > 0 && !stack[len(stack)-1].array
			if msg := badJSONString(raw); msg != "" {
				if isKey {
					return nil, &problem.FieldError{Field: path(true, false), Message: "a property name " + msg}
				}
				return nil, &problem.FieldError{Field: path(false, false), Message: msg}
			}
			if isKey {
				stack[len(stack)-1].key = v
				expectKey = false
				continue
			}
			if names[path(false, true)] {
				n, msg := textrule.Name(v)
				if msg != "" {
					return nil, &problem.FieldError{Field: path(false, false), Message: msg}
				}
				if n != v {
					enc, _ := json.Marshal(n)
					splices = append(splices, splice{start: end - int64(len(raw)), end: end, with: enc})
				}
			}
			afterValue()
		default:
			afterValue()
		}
	}
	if len(splices) > 0 {
		out = make([]byte, 0, len(body))
		at := int64(0)
		for _, sp := range splices {
			out = append(out, body[at:sp.start]...)
			out = append(out, sp.with...)
			at = sp.end
		}
		out = append(out, body[at:]...)
	}
	return out, nil
}

// splice replaces body[start:end] by with.
type splice struct {
	start, end int64
	with       []byte
}

// badJSONString says what is wrong with a raw JSON string literal (quotes included), or "".
func badJSONString(raw []byte) string {
	if !utf8.Valid(raw) {
		return "must be valid UTF-8"
	}
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' || i+1 >= len(raw) {
			continue
		}
		if raw[i+1] != 'u' {
			i++ // a two-character escape (\\, \", \n, …)
			continue
		}
		if i+6 > len(raw) {
			return ""
		}
		n, err := strconv.ParseUint(string(raw[i+2:i+6]), 16, 16)
		if err != nil {
			return ""
		}
		switch {
		case n == 0:
			return "must not contain U+0000 (NUL)"
		case n >= 0xD800 && n <= 0xDBFF:
			// A high surrogate must be followed by a low one.
			if i+12 <= len(raw) && raw[i+6] == '\\' && raw[i+7] == 'u' {
				if lo, err := strconv.ParseUint(string(raw[i+8:i+12]), 16, 16); err == nil && lo >= 0xDC00 && lo <= 0xDFFF {
					i += 11
					continue
				}
			}
			return "must not contain an unpaired surrogate (\\ud800–\\udbff without its pair)"
		case n >= 0xDC00 && n <= 0xDFFF:
			return "must not contain an unpaired surrogate (\\udc00–\\udfff alone)"
		}
		i += 5
	}
	return ""
}
