package logging

import (
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// newRedactCore wraps core so that credentials never reach it in what
// rebound writes: the message, and every error, string, Stringer, array,
// object and reflected field pass through Scrub; a field whose key is
// sensitive is written as "[REDACTED]". Levels and sampling are core's.
// Wrapping twice returns the same core; a nil core is a no-op one.
func newRedactCore(core zapcore.Core) zapcore.Core {
	if core == nil {
		return zapcore.NewNopCore()
	}
	if rc, ok := core.(redactCore); ok {
		return rc
	}
	return redactCore{Core: core}
}

// Redacted returns l writing through a core that removes credentials: the
// message and every string, error and structured field pass through Scrub,
// and a field whose key names a credential ("password", "token", "secret",
// ...) is written as "[REDACTED]". A nil l means zap.NewNop().
func Redacted(l *zap.Logger) *zap.Logger {
	if l == nil {
		return zap.NewNop()
	}
	if _, ok := l.Core().(redactCore); ok {
		return l
	}
	return l.WithOptions(zap.WrapCore(newRedactCore))
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
