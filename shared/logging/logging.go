// Package logging builds the zap loggers every binary uses and redacts secrets.
//
// Nothing here knows about business objects; it must never log a token, a signed URL or an
// Authorization value, so every field that may hold one goes through Redact first, and the
// core installed by New redacts string fields and messages as a second line of defence.
package logging

import (
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// secretPattern matches the credentials this system issues or receives: PATs and other service
// token namespaces, bearer values, signed query parameters and our compact signed tickets.
var secretPattern = regexp.MustCompile(
	`(?i)(svc_(pat|dlg|aat|oat)_[A-Za-z0-9_\-]+)` +
		`|(bearer\s+[A-Za-z0-9._~+/=\-]+)` +
		`|((sig|signature|token|ticket|access_token|x-amz-signature)=[^&\s"]+)`)

// Redact replaces every credential-looking substring of s with a fixed marker.
func Redact(s string) string {
	if !mayHoldSecret(s) {
		return s
	}
	return secretPattern.ReplaceAllStringFunc(s, func(m string) string {
		if i := strings.IndexByte(m, '='); i > 0 && !strings.HasPrefix(strings.ToLower(m), "bearer") {
			return m[:i+1] + "[REDACTED]"
		}
		return "[REDACTED]"
	})
}

// mayHoldSecret is a cheap, allocation-free prefilter: every pattern of secretPattern needs
// "svc_", "bearer" (in any case) or "=", and most log strings (IDs, paths) have none of them.
func mayHoldSecret(s string) bool {
	if strings.IndexByte(s, '=') >= 0 {
		return true
	}
	for i := 0; i+4 <= len(s); i++ {
		switch s[i] | 0x20 {
		case 's':
			if i+4 <= len(s) && s[i+1]|0x20 == 'v' && s[i+2]|0x20 == 'c' && s[i+3] == '_' {
				return true
			}
		case 'b':
			if i+6 <= len(s) && strings.EqualFold(s[i:i+6], "bearer") {
				return true
			}
		}
	}
	return false
}

// Options tune NewWith.
type Options struct {
	// Output receives the lines; nil is os.Stderr.
	Output io.Writer
	// Buffered batches lines (up to 256 KiB or one second) instead of one write per line: for
	// per-request access logs on a hot path. The owner must call Sync before exiting, or the
	// last second of lines is lost.
	Buffered bool
	// Level is debug, info, warn or error, as read by shared/config (Loader.LogLevel). Empty
	// reads LOG_LEVEL here, for the binaries that do not load their settings through
	// shared/config yet (the renderer).
	Level string
}

// New returns a JSON logger to stderr for one component at the level LOG_LEVEL names (debug,
// info, warn, error); an unknown level is a configuration error.
func New(component string) (*zap.Logger, error) { return NewWith(component, Options{}) }

// NewWith is New with options.
func NewWith(component string, o Options) (*zap.Logger, error) {
	level, err := o.level()
	if err != nil {
		return nil, err
	}
	return newLogger(component, level, output(o)), nil
}

func (o Options) level() (zapcore.Level, error) {
	level, v, name := zapcore.InfoLevel, o.Level, "level"
	if v == "" {
		v, name = os.Getenv("LOG_LEVEL"), "LOG_LEVEL"
	}
	if v != "" {
		if err := level.UnmarshalText([]byte(v)); err != nil {
			return level, fmt.Errorf("%s: %q is not one of debug, info, warn, error", name, v)
		}
	}
	return level, nil
}

func output(o Options) zapcore.WriteSyncer {
	var out zapcore.WriteSyncer = zapcore.Lock(os.Stderr)
	if o.Output != nil {
		out = zapcore.Lock(zapcore.AddSync(o.Output))
	}
	if o.Buffered {
		out = &zapcore.BufferedWriteSyncer{WS: writeOnly{out}, Size: 256 << 10, FlushInterval: time.Second}
	}
	return out
}

// writeOnly is a WriteSyncer whose Sync does nothing. zapcore.BufferedWriteSyncer syncs its
// output at every flush (once a second), holding the lock every Write waits for; an output that
// is a file would be fsynced each time, and every request's log line would wait for the disk.
// A log needs its lines written to the file (the flush does that), not on the disk at once: a
// process that exits loses nothing written, as with nginx's logs.
type writeOnly struct{ zapcore.WriteSyncer }

func (writeOnly) Sync() error { return nil }

func newLogger(component string, level zapcore.Level, out zapcore.WriteSyncer) *zap.Logger {
	enc := zap.NewProductionEncoderConfig()
	enc.TimeKey = "ts"
	enc.EncodeTime = zapcore.ISO8601TimeEncoder
	core := zapcore.NewCore(zapcore.NewJSONEncoder(enc), out, level)
	return zap.New(redactingCore{core}).With(zap.String("component", component))
}

// redactingCore redacts the message and every string field before they reach the encoder.
type redactingCore struct{ zapcore.Core }

func (c redactingCore) With(fields []zapcore.Field) zapcore.Core {
	return redactingCore{c.Core.With(redactFields(fields))}
}

func (c redactingCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c redactingCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	e.Message = Redact(e.Message)
	return c.Core.Write(e, redactFields(fields))
}

func redactFields(fields []zapcore.Field) []zapcore.Field {
	out := fields
	for i, f := range fields {
		var s string
		switch f.Type {
		case zapcore.StringType:
			s = f.String
		case zapcore.ErrorType:
			if err, ok := f.Interface.(error); ok && err != nil {
				s = err.Error()
			}
		default:
			continue
		}
		if r := Redact(s); r != s || f.Type == zapcore.ErrorType {
			if &out[0] == &fields[0] {
				out = append([]zapcore.Field(nil), fields...)
			}
			out[i] = zap.String(f.Key, r)
		}
	}
	return out
}
