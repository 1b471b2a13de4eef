package logging

import (
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// RedactCore wraps core so that credentials never reach it in what rebound
// writes: each entry's message, the text of every error field (zap.Error,
// zap.NamedError) and every string field pass through Scrub, and a string
// or error field whose key is sensitive (see IsSensitiveKey) is written as
// "[REDACTED]". An error field whose text changes is written as a string
// field with the same key. Other field types are passed through: rebound
// logs no credential in them.
//
// Levels, sampling and the decisions of a zapcore.NewTee are those of
// core: RedactCore delegates Check to it and scrubs in a pre-write hook
// (zapcore.CheckedEntry.Before). Fields given to With are scrubbed too.
// The returned core is safe for concurrent use if core is. RedactCore(nil)
// returns a no-op core; wrapping a core RedactCore returned returns it
// unchanged.
func RedactCore(core zapcore.Core) zapcore.Core {
	if core == nil {
		return zapcore.NewNopCore()
	}
	if rc, ok := core.(redactCore); ok {
		return rc
	}
	return redactCore{Core: core}
}

// Redacted returns l with its core wrapped by RedactCore. A nil l means
// zap.NewNop().
func Redacted(l *zap.Logger) *zap.Logger {
	if l == nil {
		return zap.NewNop()
	}
	if _, ok := l.Core().(redactCore); ok {
		return l
	}
	return l.WithOptions(zap.WrapCore(RedactCore))
}

type redactCore struct{ zapcore.Core }

// Level reports the wrapped core's minimum level, for zap.Logger.Level.
func (c redactCore) Level() zapcore.Level { return zapcore.LevelOf(c.Core) }

func (c redactCore) With(fields []zapcore.Field) zapcore.Core {
	return redactCore{Core: c.Core.With(scrubFields(fields))}
}

func (c redactCore) Check(ent zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if !c.Core.Enabled(ent.Level) {
		return ce
	}
	out := c.Core.Check(ent, ce)
	if out == nil || out == ce {
		return out
	}
	return out.Before(ent, scrubHook)
}

// Write scrubs for callers that write to the core directly.
func (c redactCore) Write(ent zapcore.Entry, fields []zapcore.Field) error {
	ent, fields = scrubHook(ent, fields)
	return c.Core.Write(ent, fields)
}

func scrubHook(ent zapcore.Entry, fields []zapcore.Field) (zapcore.Entry, []zapcore.Field) {
	ent.Message = Scrub(ent.Message)
	return ent, scrubFields(fields)
}

// scrubFields returns fields with credentials scrubbed. It copies fields
// only if one changes.
func scrubFields(fields []zapcore.Field) []zapcore.Field {
	var out []zapcore.Field
	for i := range fields {
		f := &fields[i]
		var s string
		switch f.Type {
		case zapcore.StringType:
			s = f.String
		case zapcore.ErrorType:
			err, ok := f.Interface.(error)
			if !ok || err == nil {
				continue
			}
			s = err.Error()
		default:
			continue
		}
		red := RedactedValue
		if !IsSensitiveKey(f.Key) {
			if red = Scrub(s); red == s { // an unchanged error keeps its type
				continue
			}
		}
		if out == nil {
			out = make([]zapcore.Field, len(fields))
			copy(out, fields)
		}
		out[i] = zap.String(f.Key, red)
	}
	if out == nil {
		return fields
	}
	return out
}
