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
	// The wrapped core checks into an entry of its own: a scrub hook on ce
	// would miss when ce is a tee's and another core accepted first (zap's
	// AddCore returns ce itself), or scrub that other core's copy too.
	inner := c.Core.Check(ent, nil)
	if inner == nil {
		return ce
	}
	return ce.AddCore(ent, scrubbedEntry{inner})
}

// scrubbedEntry writes one checked entry of the wrapped core, scrubbed.
// It is a Core only to ride in the caller's CheckedEntry.
type scrubbedEntry struct{ ce *zapcore.CheckedEntry }

func (w scrubbedEntry) Enabled(zapcore.Level) bool        { return true }
func (w scrubbedEntry) With([]zapcore.Field) zapcore.Core { return w }
func (w scrubbedEntry) Sync() error                       { return nil }
func (w scrubbedEntry) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	return ce.AddCore(e, w)
}

// Write writes the entry once, as the caller's CheckedEntry does. zap
// gives a core's own Check no error output, so a write error of the
// wrapped core is not reported (zap itself reports it nowhere else).
func (w scrubbedEntry) Write(ent zapcore.Entry, fields []zapcore.Field) error {
	ent, fields = scrubHook(ent, fields)
	w.ce.Entry = ent
	w.ce.Write(fields...)
	return nil
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
