package logging

import (
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// RedactCore wraps core so that credentials never reach it in what rebound
// writes: each entry's message, the text of every error field (zap.Error,
// zap.NamedError), every string, byte string and fmt.Stringer field pass
// through Scrub; so do the strings inside arrays, objects (zap.Array,
// zap.Strings, zap.Object, zap.Inline) and values zap encodes by
// reflection (zap.Any of a struct or a map, as JSON). A field of these
// kinds whose key is sensitive (see IsSensitiveKey), and a string inside
// an object under such a key, is written as "[REDACTED]". A field whose
// text changes is written as a string field with the same key (a
// reflected value as its scrubbed JSON). Numbers, booleans, times and
// durations are passed through.
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
