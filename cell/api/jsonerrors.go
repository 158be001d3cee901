package api

import (
	"regexp"
	"strings"
)

// Go's JSON decoder names the Go types it decodes into ("cannot unmarshal string into Go struct
// field ThemeUpdateBody.tokens of type int"); a client knows none of them. clientJSONError
// says the same in the client's terms: the field path and the JSON type expected.

var (
	goStructField = regexp.MustCompile(`^json: cannot unmarshal (\S+) into Go struct field [^ ]*?\.(\S+) of type (\S+)$`)
	goValue       = regexp.MustCompile(`^json: cannot unmarshal (\S+) into Go value of type (\S+)$`)
)

// clientJSONError rewrites a decoder message at location (huma's "body") when it names Go
// types; ok is false when msg names none.
func clientJSONError(location, msg string) (field, message string, ok bool) {
	if m := goStructField.FindStringSubmatch(msg); m != nil {
		var parts []string
		for p := range strings.SplitSeq(m[2], ".") {
			if p != "" && (p[0] < 'A' || p[0] > 'Z') { // an embedded Go struct's name is no JSON field
				parts = append(parts, p)
			}
		}
		field := location
		if len(parts) > 0 {
			field += "." + strings.Join(parts, ".")
		}
		return field, "expected " + jsonKind(m[3]) + ", got " + jsonValueKind(m[1]), true
	}
	if m := goValue.FindStringSubmatch(msg); m != nil {
		return location, "expected " + jsonKind(m[2]) + ", got " + jsonValueKind(m[1]), true
	}
	if strings.Contains(msg, "Go struct field") || strings.Contains(msg, "Go value") || strings.Contains(msg, "Go type") {
		return location, "the value does not match the operation's schema (see /openapi.json)", true
	}
	return "", "", false
}

// jsonKind names the JSON type a Go type decodes from.
func jsonKind(goType string) string {
	t := strings.TrimLeft(goType, "*")
	switch {
	case t == "string":
		return "a string"
	case t == "bool":
		return "a boolean"
	case strings.HasPrefix(t, "int"), strings.HasPrefix(t, "uint"):
		return "an integer"
	case strings.HasPrefix(t, "float"):
		return "a number"
	case strings.HasPrefix(t, "[]"):
		return "an array"
	case strings.HasPrefix(t, "map["):
		return "an object"
	case strings.HasPrefix(t, "time.Time"):
		return "a date-time string"
	default:
		return "an object"
	}
}

// jsonValueKind names the JSON value the decoder saw ("string", "number 1.5", "array", …).
func jsonValueKind(v string) string {
	switch {
	case v == "array":
		return "an array"
	case v == "object":
		return "an object"
	case v == "bool":
		return "a boolean"
	case strings.HasPrefix(v, "number"):
		return "a number"
	case v == "string":
		return "a string"
	}
	return "another type"
}
