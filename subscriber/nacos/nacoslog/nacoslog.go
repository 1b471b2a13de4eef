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

// Defaults of the bridge, stated in withLevel's and withInterval's docs.
const (
	defaultLevel    = zapcore.WarnLevel
	defaultInterval = time.Minute
	maxInterval     = time.Hour // caps the spacing of one call site's lines
)

// maxKeys bounds the throttle's memory: past it, expired keys are dropped,
// then all of them.
const maxKeys = 512

// An option configures the bridge. A nil option is ignored.
type option interface{ apply(*config) error }

type config struct {
	level    zapcore.Level
	interval time.Duration
}

type optionFunc func(*config) error

func (f optionFunc) apply(c *config) error { return f(c) }

// withLevel sets the lowest SDK level written (default Warn). SDK levels
// map to the zap levels of the same name. It must be one of zap's levels
// from Debug to Fatal (Fatal writes nothing).
func withLevel(level zapcore.Level) option {
	return optionFunc(func(c *config) error {
		if level < zapcore.DebugLevel || level > zapcore.FatalLevel {
			return &rebound.ArgumentError{Func: "nacoslog.Install", Arg: "min",
				Reason: fmt.Sprintf("%v is not a zap level from debug to fatal", level), Err: rebound.ErrInvalidArgument}
		}
		c.level = level
		return nil
	})
}

// withInterval sets the throttle interval of each SDK call site (default
// 1m): its first line, then one per interval, the spacing doubling up to
// an hour while it repeats. Zero turns throttling off; it must not be
// negative.
func withInterval(d time.Duration) option {
	return optionFunc(func(c *config) error {
		if d < 0 {
			return &rebound.ArgumentError{Func: "nacoslog.WithInterval", Arg: "d",
				Reason: "must not be negative (0 turns throttling off)", Err: rebound.ErrInvalidArgument}
		}
		c.interval = d
		return nil
	})
}

// Install points nacos-sdk-go/v2's process-wide logger at l (nil: a no-op
// logger), writing the SDK's lines from level min up (zapcore.WarnLevel
// keeps its routine chatter out). min must be a zap level from Debug to
// Fatal (Fatal writes nothing). Call Install after creating each SDK
// client (clients.NewNamingClient, NewConfigClient): the SDK replaces its
// logger when it builds one.
func Install(l *zap.Logger, min zapcore.Level) error {
	b, err := newBridge(l, withLevel(min))
	if err != nil {
		return err
	}
	nacoslogger.SetLogger(b)
	return nil
}

// bridge is newBridge's nacos-sdk-go/v2 common/logger.Logger writing to a
// *zap.Logger. It is safe for concurrent use.
type bridge struct {
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

var _ nacoslogger.Logger = (*bridge)(nil)

// newBridge returns the SDK logger Install installs. It is safe for
// concurrent use.
func newBridge(l *zap.Logger, opts ...option) (nacoslogger.Logger, error) {
	cfg := config{level: defaultLevel, interval: defaultInterval}
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
	// function (logger.Infof), the bridge method, bridge.write.
	l = logging.Redacted(l).WithOptions(
		zap.AddCallerSkip(3),
		zap.WrapCore(func(c zapcore.Core) zapcore.Core { return minLevelCore{Core: c, min: cfg.level} }),
	)
	return &bridge{
		l:        l.WithOptions(zap.AddStacktrace(zapcore.FatalLevel + 1)),
		debug:    l,
		interval: cfg.interval,
		seen:     make(map[throttleKey]*throttled),
	}, nil
}

// Debug logs at zap's Debug level.
func (b *bridge) Debug(args ...any) { b.write(zapcore.DebugLevel, "", args, false) }

// Info logs at zap's Info level.
func (b *bridge) Info(args ...any) { b.write(zapcore.InfoLevel, "", args, false) }

// Warn logs at zap's Warn level.
func (b *bridge) Warn(args ...any) { b.write(zapcore.WarnLevel, "", args, false) }

// Error logs at zap's Error level.
func (b *bridge) Error(args ...any) { b.write(zapcore.ErrorLevel, "", args, false) }

// Debugf logs at zap's Debug level.
func (b *bridge) Debugf(format string, args ...any) {
	b.write(zapcore.DebugLevel, format, args, true)
}

// Infof logs at zap's Info level.
func (b *bridge) Infof(format string, args ...any) { b.write(zapcore.InfoLevel, format, args, true) }

// Warnf logs at zap's Warn level.
func (b *bridge) Warnf(format string, args ...any) { b.write(zapcore.WarnLevel, format, args, true) }

// Errorf logs at zap's Error level.
func (b *bridge) Errorf(format string, args ...any) {
	b.write(zapcore.ErrorLevel, format, args, true)
}

// write must be called directly by the exported methods (see the caller
// skip in newBridge).
func (b *bridge) write(lvl zapcore.Level, format string, args []any, formatted bool) {
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
func (b *bridge) admit(k throttleKey) (dropped int, ok bool) {
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
		t.gap = min(2*t.gap, maxInterval)
	}
	dropped, t.dropped, t.next = t.dropped, 0, now.Add(t.gap)
	return dropped, true
}

func (b *bridge) evict(now time.Time) {
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
