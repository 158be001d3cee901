// Package monitoring holds the fleet's Prometheus rules (rules.yml, unit-tested by
// rules_test.yml with promtool) and Grafana dashboards (dashboards/*.json), and checks that
// every metric they name is one the binaries export (CELLS.md, "Monitoring").
//
// Metric names are read from PromQL by a small lexer (MetricNames) rather than Prometheus's
// parser: github.com/prometheus/prometheus would raise a third of this module's dependencies
// (AWS SDK, gRPC, OpenTelemetry) to its own versions.
package monitoring

import (
	"fmt"
	"sort"
	"strings"
)

// keywords are PromQL words that are never metric names outside a function call: binary and
// set operators, grouping modifiers, offset and @'s start()/end().
var keywords = map[string]bool{
	"and": true, "or": true, "unless": true, "atan2": true, "bool": true, "offset": true,
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
	"inf": true, "nan": true, "Inf": true, "NaN": true,
}

// aggregations are the aggregation operators, which may come before their by or without
// clause: sum by (x) (…).
var aggregations = map[string]bool{
	"sum": true, "min": true, "max": true, "avg": true, "group": true, "stddev": true, "stdvar": true, "count": true,
	"count_values": true, "bottomk": true, "topk": true, "quantile": true, "limitk": true, "limit_ratio": true,
}

// labelLists are the keywords followed by a parenthesised list of label names.
var labelLists = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true}

func identStart(c byte) bool {
	return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func identPart(c byte) bool { return identStart(c) || c >= '0' && c <= '9' }

// MetricNames returns the sorted metric names a PromQL expression selects: every identifier
// that is not a function, an aggregation, a keyword or a label, plus {__name__="…"}. Grafana
// variables ($cell, ${cell}, $__rate_interval) are skipped. A matcher on __name__ other than
// an equality, or an unbalanced bracket or quote, is an error: the check must not guess.
func MetricNames(expr string) ([]string, error) {
	names := map[string]bool{}
	i, n := 0, len(expr)
	skipSpace := func(j int) int {
		for j < n && (expr[j] == ' ' || expr[j] == '\t' || expr[j] == '\n' || expr[j] == '\r') {
			j++
		}
		return j
	}
	// str skips the quoted string at j and returns its content and the index after it.
	str := func(j int) (string, int, error) {
		q := expr[j]
		var b strings.Builder
		for k := j + 1; k < n; k++ {
			switch {
			case expr[k] == '\\' && q != '`' && k+1 < n:
				b.WriteByte(expr[k+1])
				k++
			case expr[k] == q:
				return b.String(), k + 1, nil
			default:
				b.WriteByte(expr[k])
			}
		}
		return "", 0, fmt.Errorf("unterminated string at offset %d", j)
	}
	// closing finds the bracket closing the one at j, skipping strings.
	closing := func(j int, open, shut byte) (int, error) {
		depth := 0
		for k := j; k < n; k++ {
			switch expr[k] {
			case '"', '\'', '`':
				_, e, err := str(k)
				if err != nil {
					return 0, err
				}
				k = e - 1
			case open:
				depth++
			case shut:
				depth--
				if depth == 0 {
					return k, nil
				}
			}
		}
		return 0, fmt.Errorf("unbalanced %c at offset %d", open, j)
	}
	// matchers reads the label matchers between { at j and its }, noting a __name__ equality.
	matchers := func(j int) (int, error) {
		end, err := closing(j, '{', '}')
		if err != nil {
			return 0, err
		}
		k := j + 1
		for k < end {
			k = skipSpace(k)
			if k >= end {
				break
			}
			switch {
			case expr[k] == ',':
				k++
			case identStart(expr[k]) || expr[k] == '"':
				var label string
				quoted := expr[k] == '"'
				if quoted {
					label, k, err = str(k)
					if err != nil {
						return 0, err
					}
				} else {
					s := k
					for k < end && identPart(expr[k]) {
						k++
					}
					label = expr[s:k]
				}
				k = skipSpace(k)
				op := ""
				for k < end && strings.IndexByte("=!~", expr[k]) >= 0 {
					op += string(expr[k])
					k++
				}
				k = skipSpace(k)
				if op == "" && quoted { // a quoted name inside braces: {"metric.name"}
					names[label] = true
					continue
				}
				if k >= end || expr[k] != '"' && expr[k] != '\'' && expr[k] != '`' {
					return 0, fmt.Errorf("matcher %s%s without a quoted value at offset %d", label, op, k)
				}
				var v string
				v, k, err = str(k)
				if err != nil {
					return 0, err
				}
				if label == "__name__" {
					if op != "=" {
						return 0, fmt.Errorf("matcher __name__%s%q: only an equality names a metric the check can verify", op, v)
					}
					names[v] = true
				}
			default:
				return 0, fmt.Errorf("unexpected %q in label matchers at offset %d", expr[k], k)
			}
		}
		return end + 1, nil
	}
	for i < n {
		c := expr[i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			_, e, err := str(i)
			if err != nil {
				return nil, err
			}
			i = e
		case c == '#': // a comment runs to the end of the line
			for i < n && expr[i] != '\n' {
				i++
			}
		case c == '[': // a range or subquery: durations and variables only
			e, err := closing(i, '[', ']')
			if err != nil {
				return nil, err
			}
			i = e + 1
		case c == '{':
			e, err := matchers(i)
			if err != nil {
				return nil, err
			}
			i = e
		case c == '$': // a Grafana variable: $name or ${name}
			i++
			if i < n && expr[i] == '{' {
				e, err := closing(i, '{', '}')
				if err != nil {
					return nil, err
				}
				i = e + 1
			} else {
				for i < n && identPart(expr[i]) {
					i++
				}
			}
		case c >= '0' && c <= '9' || c == '.' && i+1 < n && expr[i+1] >= '0' && expr[i+1] <= '9':
			// a number or a duration (offset 5m): digits, letters, dots, an exponent's sign
			for i < n && (identPart(expr[i]) || expr[i] == '.' ||
				(expr[i] == '+' || expr[i] == '-') && (expr[i-1] == 'e' || expr[i-1] == 'E')) {
				i++
			}
		case identStart(c):
			s := i
			for i < n && identPart(expr[i]) {
				i++
			}
			word := expr[s:i]
			j := skipSpace(i)
			switch {
			case labelLists[word]:
				if j < n && expr[j] == '(' {
					e, err := closing(j, '(', ')')
					if err != nil {
						return nil, err
					}
					i = e + 1
				}
			case word == "offset":
				// the duration that follows is skipped as a number
			case keywords[word]:
			case aggregations[word] && (strings.HasPrefix(expr[j:], "by") || strings.HasPrefix(expr[j:], "without")):
				// sum by (x) (…): the clause and the call follow
			case j < n && expr[j] == '(':
				// a function or an aggregation (sum by (x) (…) reaches here as "sum" then "by")
			default:
				names[word] = true
			}
		default:
			i++
		}
	}
	out := make([]string, 0, len(names))
	for k := range names {
		out = append(out, k)
	}
	sort.Strings(out)
	return out, nil
}
