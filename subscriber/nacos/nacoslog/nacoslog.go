package nacoslog

import (
	"fmt"
	"strings"
	"sync"
	"time"

	nacoslogger "github.com/nacos-group/nacos-sdk-go/v2/common/logger"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/logging"
)

// Defaults of New and Install.
const (
	DefaultLevel    = zapcore.WarnLevel
	DefaultInterval = time.Minute
	// MaxInterval caps the spacing of one call site's lines.
	MaxInterval = time.Hour
)

// maxKeys bounds the throttle's memory: past it, expired keys are dropped,
// then all of them.
const maxKeys = 512

// An Option configures New and Install. A nil Option is ignored.
type Option interface{ apply(*config) error }

type config struct {
	level    zapcore.Level
	interval time.Duration
}

type optionFunc func(*config) error

func (f optionFunc) apply(c *config) error { return f(c) }

// WithLevel sets the lowest SDK level written (default DefaultLevel,
// Warn). SDK Debug, Info, Warn and Error map to the zap levels of the same
// name; the logger's own level still applies. It must be one of zap's
// levels from Debug to Fatal (Fatal: the SDK, which never logs at Fatal,
// writes nothing).
func WithLevel(level zapcore.Level) Option {
	return optionFunc(func(c *config) error {
		if level < zapcore.DebugLevel || level > zapcore.FatalLevel {
			return &rebound.ArgumentError{Func: "nacoslog.WithLevel", Arg: "level",
				Reason: fmt.Sprintf("%v is not a zap level from debug to fatal", level), Err: rebound.ErrInvalidArgument}
		}
		c.level = level
		return nil
	})
}

// WithInterval sets the throttle interval (default DefaultInterval, 1m).
// Each SDK call site (its level and format string; for the unformatted
// calls, its message with digits ignored) writes its first line, then at
// most one line per interval; while the site keeps logging the spacing
// doubles (1m, 2m, 4m, ... up to MaxInterval), and a site that stays quiet
// for a whole spacing starts over. A line written after others were left
// out carries the field "dropped" with their number. So a 10-minute
// outage writes at most 4 lines per call site. Zero turns throttling off;
// a negative interval is an error.
func WithInterval(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d < 0 {
			return &rebound.ArgumentError{Func: "nacoslog.WithInterval", Arg: "d",
				Reason: "must not be negative (0 turns throttling off)", Err: rebound.ErrInvalidArgument}
		}
		c.interval = d
		return nil
	})
}

// Install makes nacos-sdk-go/v2 write its log output into l through a
// bridge built by New(l, opts...): it calls the SDK's process-wide
// common/logger.SetLogger. A nil l discards the SDK's output. It returns
// New's error and installs nothing then.
//
// Install it AFTER creating the SDK's clients, and again after creating
// any later one. In nacos-sdk-go v2.3.2, clients.NewNamingClient and
// clients.NewConfigClient both call
// logger.InitLogger(logger.BuildLoggerConfig(clientConfig)), which replaces
// the global logger with one writing to ClientConfig.LogDir/nacos-sdk.log
// at ClientConfig.LogLevel; a logger installed before is silently dropped.
// What the SDK logs while the client is being built (it connects inside
// NewNamingClient) always goes to that file.
//
// The SDK logger is global: Install affects every SDK client in the
// process, and the last call wins. It is safe to call concurrently with
// the SDK's logging.
func Install(l *zap.Logger, opts ...Option) error {
	b, err := New(l, opts...)
	if err != nil {
		return err
	}
	nacoslogger.SetLogger(b)
	return nil
}

// Logger is the bridge: a nacos-sdk-go/v2 common/logger.Logger writing to
// a *zap.Logger. It is safe for concurrent use.
type Logger struct {
	l        *zap.Logger // Info and above: no stack traces
	debug    *zap.Logger // Debug: the logger's own stack trace setting
	interval time.Duration

	mu   sync.Mutex
	seen map[throttleKey]*throttled
}

type throttleKey struct {
	lvl  zapcore.Level
	text string
}

type throttled struct {
	next    time.Time     // when the next line of this key may be written
	last    time.Time     // the last call, written or not
	gap     time.Duration // the current spacing
	dropped int           // lines left out since the last one written
}

var _ nacoslogger.Logger = (*Logger)(nil)

// New returns a bridge that writes to l the SDK's lines at the level set by
// WithLevel and above, throttled (WithInterval). A nil l means
// zap.NewNop(). What it writes:
//
//   - the message, formatted like zap.SugaredLogger does (fmt.Sprint,
//     fmt.Sprintf) only when the level is enabled;
//   - credentials scrubbed (logging.Scrub): the SDK puts request
//     parameters, configuration and error texts into its messages, e.g.
//     "password:[x]", `"accessToken":"x"`, "Password:x" in a %+v
//     ClientConfig, "user:pw@" in a URL;
//   - stack traces kept to Debug: the frames that the SDK's "%+v" of a
//     github.com/pkg/errors error prints into the message are cut from
//     lines above Debug, and such lines get no zap stack trace either;
//   - the caller, if l records it, is the SDK code that logged;
//   - the field "dropped" on a line that follows throttled repeats.
func New(l *zap.Logger, opts ...Option) (*Logger, error) {
	cfg := config{level: DefaultLevel, interval: DefaultInterval}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o.apply(&cfg); err != nil {
			return nil, err
		}
	}
	if l == nil {
		l = zap.NewNop()
	}
	// Frames between the SDK's call site and l.Check: the SDK's package
	// function (logger.Infof), the bridge method, Logger.write.
	l = logging.Redacted(l).WithOptions(
		zap.AddCallerSkip(3),
		zap.WrapCore(func(c zapcore.Core) zapcore.Core { return minLevelCore{Core: c, min: cfg.level} }),
	)
	return &Logger{
		l:        l.WithOptions(zap.AddStacktrace(zapcore.FatalLevel + 1)),
		debug:    l,
		interval: cfg.interval,
		seen:     make(map[throttleKey]*throttled),
	}, nil
}

// Debug logs at zap's Debug level.
func (b *Logger) Debug(args ...any) { b.write(zapcore.DebugLevel, "", args, false) }

// Info logs at zap's Info level.
func (b *Logger) Info(args ...any) { b.write(zapcore.InfoLevel, "", args, false) }

// Warn logs at zap's Warn level.
func (b *Logger) Warn(args ...any) { b.write(zapcore.WarnLevel, "", args, false) }

// Error logs at zap's Error level.
func (b *Logger) Error(args ...any) { b.write(zapcore.ErrorLevel, "", args, false) }

// Debugf logs at zap's Debug level.
func (b *Logger) Debugf(format string, args ...any) {
	b.write(zapcore.DebugLevel, format, args, true)
}

// Infof logs at zap's Info level.
func (b *Logger) Infof(format string, args ...any) { b.write(zapcore.InfoLevel, format, args, true) }

// Warnf logs at zap's Warn level.
func (b *Logger) Warnf(format string, args ...any) { b.write(zapcore.WarnLevel, format, args, true) }

// Errorf logs at zap's Error level.
func (b *Logger) Errorf(format string, args ...any) {
	b.write(zapcore.ErrorLevel, format, args, true)
}

// write must be called directly by the exported methods (see the caller
// skip in New).
func (b *Logger) write(lvl zapcore.Level, format string, args []any, formatted bool) {
	l := b.l
	if lvl == zapcore.DebugLevel {
		l = b.debug
	}
	if !l.Core().Enabled(lvl) {
		return
	}
	var msg string
	switch {
	case !formatted || format == "":
		msg = fmt.Sprint(args...)
	case len(args) > 0:
		msg = fmt.Sprintf(format, args...)
	default:
		msg = format
	}
	key := format
	if !formatted || format == "" {
		key = withoutDigits(msg)
	}
	dropped, ok := b.admit(throttleKey{lvl, key})
	if !ok {
		return
	}
	if lvl > zapcore.DebugLevel {
		msg = cutStack(msg)
	}
	if ce := l.Check(lvl, msg); ce != nil {
		if dropped > 0 {
			ce.Write(zap.Int("dropped", dropped))
		} else {
			ce.Write()
		}
	}
}

// admit reports whether a line of key may be written now and how many of
// its lines were dropped before it.
func (b *Logger) admit(k throttleKey) (dropped int, ok bool) {
	if b.interval <= 0 {
		return 0, true
	}
	now := time.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	t := b.seen[k]
	if t == nil {
		if len(b.seen) >= maxKeys {
			b.evict(now)
		}
		b.seen[k] = &throttled{next: now.Add(b.interval), last: now, gap: b.interval}
		return 0, true
	}
	quiet := now.Sub(t.last) >= t.gap // a new episode: start over
	t.last = now
	switch {
	case quiet:
		t.gap = b.interval
	case now.Before(t.next):
		t.dropped++
		return 0, false
	default:
		t.gap = min(2*t.gap, MaxInterval)
	}
	dropped, t.dropped, t.next = t.dropped, 0, now.Add(t.gap)
	return dropped, true
}

func (b *Logger) evict(now time.Time) {
	for k, t := range b.seen {
		if now.Sub(t.last) >= t.gap && t.dropped == 0 {
			delete(b.seen, k)
		}
	}
	if len(b.seen) >= maxKeys {
		clear(b.seen)
	}
}

// withoutDigits returns s without its digits, so that lines differing in
// counters, ports or ids share a throttle key.
func withoutDigits(s string) string {
	if !strings.ContainsAny(s, "0123456789") {
		return s
	}
	return strings.Map(func(r rune) rune {
		if '0' <= r && r <= '9' {
			return -1
		}
		return r
	}, s)
}

// cutStack removes the stack frames that fmt's "%+v" of a
// github.com/pkg/errors error writes: pairs of lines "function" and
// "\tfile:line". The rest of the message is kept, lines joined by a space.
func cutStack(msg string) string {
	if !strings.Contains(msg, "\n\t") {
		return strings.TrimRight(msg, "\n")
	}
	lines := strings.Split(msg, "\n")
	kept := lines[:0]
	for i, ln := range lines {
		if strings.HasPrefix(ln, "\t") {
			continue // "\tfile:line"
		}
		if i+1 < len(lines) && strings.HasPrefix(lines[i+1], "\t") && i > 0 {
			continue // the function of a frame
		}
		if ln = strings.TrimSpace(ln); ln != "" {
			kept = append(kept, ln)
		}
	}
	return strings.Join(kept, " ")
}

// minLevelCore drops entries below min; it may raise the wrapped core's
// level but never lowers it (unlike zapcore.NewIncreaseLevelCore, it
// accepts any min).
type minLevelCore struct {
	zapcore.Core
	min zapcore.Level
}

func (c minLevelCore) Enabled(lvl zapcore.Level) bool {
	return lvl >= c.min && c.Core.Enabled(lvl)
}

func (c minLevelCore) Level() zapcore.Level {
	return max(c.min, zapcore.LevelOf(c.Core))
}

func (c minLevelCore) With(fields []zapcore.Field) zapcore.Core {
	return minLevelCore{Core: c.Core.With(fields), min: c.min}
}

func (c minLevelCore) Check(ent zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if ent.Level < c.min {
		return ce
	}
	return c.Core.Check(ent, ce)
}
