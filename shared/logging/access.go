package logging

import (
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// AccessLog writes one JSON line per request, in the shape and to the output of the zap logger
// it was made with (NewWithAccess), without zap's general machinery: on a proxy's hot path the
// generic encoder, field slices and the redacting core cost several times what the line
// itself does (BENCHMARKS.md). Every string value is redacted like the logger's fields.
//
// Lines look like the logger's own:
//
//	{"level":"info","ts":"2026-11-22T02:00:00.000Z","msg":"request","component":"router","method":"GET",…}
//
// A nil *AccessLog, or one whose level excludes info, writes nothing.
type AccessLog struct {
	out       zapcore.WriteSyncer
	component string // already a JSON string body
	enabled   bool
	pool      sync.Pool
	stamp     atomic.Pointer[stamp]
}

// Line is one access-log line being built. Keys must be plain ASCII names; they are not
// escaped. Values are.
type Line struct {
	a *AccessLog
	b []byte
}

// NewWithAccess is NewWith, plus an AccessLog writing to the same output (and, when
// Options.Buffered, the same buffer, flushed by the logger's Sync).
func NewWithAccess(component string, o Options) (*zap.Logger, *AccessLog, error) {
	level, err := o.level()
	if err != nil {
		return nil, nil, err
	}
	out := output(o)
	a := &AccessLog{out: out, enabled: level.Enabled(zapcore.InfoLevel)}
	a.component = string(appendEscaped(nil, Redact(component)))
	return newLogger(component, level, out), a, nil
}

// Enabled reports whether lines are written.
func (a *AccessLog) Enabled() bool { return a != nil && a.enabled }

// Begin starts an info line with the given message, stamped now. It returns nil when the log
// is disabled; all Line methods accept a nil receiver.
func (a *AccessLog) Begin(msg string) *Line {
	if !a.Enabled() {
		return nil
	}
	return a.BeginAt(msg, time.Now())
}

// BeginAt is Begin stamped at now: for a caller that read the clock already (to time the
// request the line is about), which saves reading it again.
func (a *AccessLog) BeginAt(msg string, now time.Time) *Line {
	if !a.Enabled() {
		return nil
	}
	l, _ := a.pool.Get().(*Line)
	if l == nil {
		l = &Line{a: a, b: make([]byte, 0, 512)}
	}
	b := append(l.b[:0], `{"level":"info","ts":"`...)
	b = a.appendTime(b, now)
	b = append(b, `","msg":"`...)
	b = appendEscaped(b, Redact(msg))
	b = append(b, `","component":"`...)
	b = append(b, a.component...)
	b = append(b, '"')
	l.b = b
	return l
}

// isoLayout is zapcore.ISO8601TimeEncoder's layout.
const isoLayout = "2006-01-02T15:04:05.000Z0700"

// stamp is the current second, formatted: the date and time before the milliseconds and the
// zone after them. Formatting a time costs more than the rest of a line; this is done once a
// second.
type stamp struct {
	sec        int64
	head, zone string
}

// appendTime appends now in isoLayout.
func (a *AccessLog) appendTime(b []byte, now time.Time) []byte {
	st := a.stamp.Load()
	if st == nil || st.sec != now.Unix() {
		f := now.Format(isoLayout) // 2006-01-02T15:04:05.000Z0700: millis at [19:23]
		st = &stamp{sec: now.Unix(), head: f[:19], zone: f[23:]}
		a.stamp.Store(st)
	}
	ms := now.Nanosecond() / int(time.Millisecond)
	b = append(b, st.head...)
	b = append(b, '.', byte('0'+ms/100), byte('0'+ms/10%10), byte('0'+ms%10))
	return append(b, st.zone...)
}

// Str adds a string field, redacted.
func (l *Line) Str(key, value string) *Line {
	if l == nil {
		return nil
	}
	l.b = append(l.b, ',', '"')
	l.b = append(l.b, key...)
	l.b = append(l.b, `":"`...)
	l.b = appendEscaped(l.b, Redact(value))
	l.b = append(l.b, '"')
	return l
}

// Int adds an integer field.
func (l *Line) Int(key string, v int64) *Line {
	if l == nil {
		return nil
	}
	l.b = append(l.b, ',', '"')
	l.b = append(l.b, key...)
	l.b = append(l.b, `":`...)
	l.b = strconv.AppendInt(l.b, v, 10)
	return l
}

// Dur adds a duration field in seconds, as the logger's duration encoder writes it.
func (l *Line) Dur(key string, d time.Duration) *Line {
	if l == nil {
		return nil
	}
	l.b = append(l.b, ',', '"')
	l.b = append(l.b, key...)
	l.b = append(l.b, `":`...)
	// As zapcore.SecondsDurationEncoder computes it (d.Seconds() can differ in the last digit).
	l.b = strconv.AppendFloat(l.b, float64(d)/float64(time.Second), 'f', -1, 64)
	return l
}

// End finishes the line and writes it. The Line must not be used afterwards.
func (l *Line) End() {
	if l == nil {
		return
	}
	l.b = append(l.b, '}', '\n')
	_, _ = l.a.out.Write(l.b)
	if cap(l.b) <= 4<<10 {
		l.a.pool.Put(l)
	}
}

// appendEscaped appends s as the body of a JSON string, as zap's JSON encoder does: control
// characters, quotes and backslashes escaped, invalid UTF-8 replaced by U+FFFD.
func appendEscaped(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	start := 0 // s[start:i] is plain and not yet appended
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r != utf8.RuneError || size != 1 {
				i += size
				continue
			}
		}
		b = append(b, s[start:i]...)
		switch {
		case c >= utf8.RuneSelf:
			b = append(b, `\ufffd`...)
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c == '\n':
			b = append(b, '\\', 'n')
		case c == '\r':
			b = append(b, '\\', 'r')
		case c == '\t':
			b = append(b, '\\', 't')
		default:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		i++
		start = i
	}
	b = append(b, s[start:]...)
	return b
}
