package logging

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/rebound-go/rebound"
)

// Reminder schedule of a failing Loop (stated in Loop's doc): the first
// reminder at 1m of downtime, then each when the downtime has doubled,
// until the spacing reaches an hour.
const (
	firstReminder       = time.Minute
	maxReminderInterval = time.Hour
)

// Messages a Loop logs: the package doc lists them, a contract users' log
// queries rely on.
const (
	msgFailing      = "retry loop failing"       // Warn: the first failure of an outage
	msgStillFailing = "retry loop still failing" // Warn: a reminder during a long outage
	msgRetry        = "retry attempt failed"     // Debug: every other failure
	msgRecovered    = "retry loop recovered"     // Info: success after failures
	msgSucceeded    = "retry loop succeeded"     // Debug: success with no failure before it
	msgGaveUp       = "retry loop gave up"       // Error: the loop stopped for good
	msgStopped      = "retry loop stopped"       // Info: the loop's context was cancelled
)

// Loop logs one long-lived retry loop with throttling: the package doc
// lists its lines and when it writes them. A nil *Loop and the zero Loop
// log nothing. It is safe for concurrent use.
type Loop struct {
	log *zap.Logger // nil: log nothing

	mu       sync.Mutex
	failing  bool
	since    time.Time     // first failure of the current outage
	reminder time.Duration // downtime at which the next reminder is due
}

// NewLoop returns a Loop that logs to Redacted(l), with "component" (if not
// empty) and fields on every line. A Loop is the rebound.Observer of one
// retry loop: keep it for the loop's lifetime, one per loop.
func NewLoop(l *zap.Logger, component string, fields ...zap.Field) *Loop {
	if l == nil {
		l = zap.NewNop()
	}
	// Frames between the caller that matters and l.Check: the exported
	// method (Failed, Observe, ...) and the unexported one that logs.
	l = Redacted(l).WithOptions(zap.AddCallerSkip(2))
	if component != "" {
		l = l.With(zap.String("component", component))
	}
	if len(fields) > 0 {
		l = l.With(fields...)
	}
	return &Loop{log: l}
}

// Observe logs an EventRetry as a failure (Warn when an outage starts or a
// reminder is due, else Debug), a successful EventAttempt as a success and
// an EventGiveUp as the end; it ignores other kinds. Lines report the
// first caller outside package rebound.
func (lp *Loop) Observe(e rebound.Event) {
	switch e.Kind {
	case rebound.EventRetry:
		lp.failed(e.Attempt, e.Err, e.Delay, true)
	case rebound.EventAttempt:
		if e.Err == nil {
			lp.succeeded(e.Attempt, true)
		}
	case rebound.EventGiveUp:
		lp.gaveUp(e.Attempt, e.Err, true)
	}
}

// write writes ce with fields; if viaObserve, it first moves the entry's
// caller out of package rebound.
func write(ce *zapcore.CheckedEntry, viaObserve bool, fields ...zap.Field) {
	if viaObserve && ce.Caller.Defined {
		ce.Caller = callerOutsideRebound(ce.Caller)
	}
	ce.Write(fields...)
}

// callerOutsideRebound returns the first frame of the current stack that
// is neither in package rebound, nor in this package, nor in
// cenkalti/backoff (a user's backoff.Retry over a BackOff from
// rebound.Policy.NewBackOff), or c if there is none. It runs only for
// lines that are written.
func callerOutsideRebound(c zapcore.EntryCaller) zapcore.EntryCaller {
	const (
		root    = "github.com/rebound-go/rebound."
		self    = "github.com/rebound-go/rebound/logging."
		backoff = "github.com/cenkalti/backoff/" // backoff.Retry over rebound's BackOff
	)
	var pcs [32]uintptr
	frames := runtime.CallersFrames(pcs[:runtime.Callers(3, pcs[:])])
	for {
		f, more := frames.Next()
		if f.Function != "" && !strings.HasPrefix(f.Function, root) && !strings.HasPrefix(f.Function, self) &&
			!strings.HasPrefix(f.Function, backoff) {
			return zapcore.EntryCaller{Defined: true, PC: f.PC, File: f.File, Line: f.Line, Function: f.Function}
		}
		if !more {
			return c
		}
	}
}

func (lp *Loop) failed(attempt int, err error, delay time.Duration, viaObserve bool) {
	if lp == nil || lp.log == nil {
		return
	}
	now := time.Now()
	var (
		first, remind bool
		downtime      time.Duration
	)
	lp.mu.Lock()
	if !lp.failing {
		lp.failing, lp.since, lp.reminder = true, now, firstReminder
		first = true
	} else if downtime = now.Sub(lp.since); downtime >= lp.reminder {
		remind = true
		for lp.reminder <= downtime {
			lp.reminder += min(lp.reminder, maxReminderInterval)
		}
	}
	lp.mu.Unlock()

	// Check first, so that the hot (Debug, disabled) path builds no fields.
	switch {
	case first:
		if ce := lp.log.Check(zapcore.WarnLevel, msgFailing); ce != nil {
			write(ce, viaObserve, zap.Int("attempt", attempt), zap.Duration("delay", delay), zap.Error(err))
		}
	case remind:
		if ce := lp.log.Check(zapcore.WarnLevel, msgStillFailing); ce != nil {
			write(ce, viaObserve, zap.Int("attempt", attempt), zap.Duration("delay", delay),
				zap.Duration("downtime", downtime), zap.Error(err))
		}
	default:
		if ce := lp.log.Check(zapcore.DebugLevel, msgRetry); ce != nil {
			write(ce, viaObserve, zap.Int("attempt", attempt), zap.Duration("delay", delay), zap.Error(err))
		}
	}
}

func (lp *Loop) succeeded(attempts int, viaObserve bool) {
	if lp == nil || lp.log == nil {
		return
	}
	wasFailing, downtime := lp.end()
	if !wasFailing {
		if ce := lp.log.Check(zapcore.DebugLevel, msgSucceeded); ce != nil {
			write(ce, viaObserve, zap.Int("attempts", attempts))
		}
		return
	}
	if ce := lp.log.Check(zapcore.InfoLevel, msgRecovered); ce != nil {
		write(ce, viaObserve, zap.Int("attempts", attempts), zap.Duration("downtime", downtime))
	}
}

func (lp *Loop) gaveUp(attempts int, err error, viaObserve bool) {
	if lp == nil || lp.log == nil {
		return
	}
	_, downtime := lp.end()
	lvl, msg := zapcore.ErrorLevel, msgGaveUp
	if errors.Is(err, context.Canceled) {
		lvl, msg = zapcore.InfoLevel, msgStopped
	}
	if ce := lp.log.Check(lvl, msg); ce != nil {
		write(ce, viaObserve, zap.Int("attempts", attempts), zap.Duration("downtime", downtime), zap.Error(err))
	}
}

// end ends the current outage, if any, and returns its downtime.
func (lp *Loop) end() (wasFailing bool, downtime time.Duration) {
	now := time.Now()
	lp.mu.Lock()
	defer lp.mu.Unlock()
	if !lp.failing {
		return false, 0
	}
	downtime = now.Sub(lp.since)
	lp.failing, lp.since, lp.reminder = false, time.Time{}, 0
	return true, downtime
}
