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

// Reminder schedule of a failing Loop.
const (
	// FirstReminder is the downtime after which a failing Loop logs its
	// first "still failing" reminder. Each following reminder is due when
	// the downtime has doubled (2m, 4m, 8m, ...), until the spacing
	// reaches MaxReminderInterval.
	FirstReminder = time.Minute
	// MaxReminderInterval caps the spacing between two reminders.
	MaxReminderInterval = time.Hour
)

// Messages a Loop logs. Other packages' tests may match on them.
const (
	MsgFailing      = "retry loop failing"       // Warn: the first failure of an outage
	MsgStillFailing = "retry loop still failing" // Warn: a reminder during a long outage
	MsgRetry        = "retry attempt failed"     // Debug: every other failure
	MsgRecovered    = "retry loop recovered"     // Info: success after failures
	MsgSucceeded    = "retry loop succeeded"     // Debug: success with no failure before it
	MsgGaveUp       = "retry loop gave up"       // Error: the loop stopped for good
	MsgStopped      = "retry loop stopped"       // Info: the loop's context was cancelled
)

// Loop logs one long-lived retry loop (a subscription, a failback task)
// with throttling: one Warn when the loop starts failing, Debug for each
// further failure, a "still failing" Warn reminder after 1m, 2m, 4m, ... of
// downtime (spacing capped at MaxReminderInterval), one Info on recovery and
// one Error on give-up (Info if the loop was cancelled). See the package
// documentation for the fields.
//
// Downtime is measured with time.Now from the first failure of an outage
// (testing/synctest virtualises it). Recovery and give-up end the outage:
// the next failure is logged at Warn again.
//
// Every line goes through RedactCore and carries the "component" field (if
// not empty) and the fields given to NewLoop.
//
// A Loop is safe for concurrent use; each state change is logged exactly
// once, but lines from concurrent calls may be written in either order
// (lines are written after the Loop's lock is released, so zap hooks and
// cores never run under it). A nil *Loop and the zero Loop are valid and log
// nothing.
type Loop struct {
	log *zap.Logger // nil: log nothing

	mu       sync.Mutex
	failing  bool
	since    time.Time     // first failure of the current outage
	reminder time.Duration // downtime at which the next reminder is due
}

// NewLoop returns a Loop that logs to l, with the field "component" set to
// component (omitted if empty) and the given fields (for example the
// subscription key or the call's target) on every line. A nil l means
// zap.NewNop(). Sensitive fields are redacted (see RedactCore).
//
// Create one Loop per long-lived loop and keep it for the loop's lifetime,
// across rebound.Retry calls if the loop runs several: an outage is
// tracked from the first failure to the next success or give-up, whichever
// Retry call they come from.
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

// RetryObserver returns NewLoop(l, component, fields...), an Observer
// for rebound.WithObserver. Every call returns a new Loop: use one per
// retry loop.
func RetryObserver(l *zap.Logger, component string, fields ...zap.Field) rebound.Observer {
	return NewLoop(l, component, fields...)
}

// Observe makes a Loop a rebound.Observer: it logs EventRetry as Failed,
// a successful EventAttempt as Succeeded and EventGiveUp as GaveUp, with
// the event's Attempt. Events of any other kind are ignored. Use it as
// rebound.WithObserver(lp).
//
// The caller a line reports (if the logger records callers) is the first
// one outside package rebound (and the backoff loop it runs): the code
// that called rebound.Retry, not the retry loop that called Observe.
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

// Failed records that attempt number attempt failed with err and that the
// loop will try again after delay. It logs MsgFailing at Warn if the loop
// was not failing, MsgStillFailing at Warn if a reminder is due, and
// MsgRetry at Debug otherwise.
func (lp *Loop) Failed(attempt int, err error, delay time.Duration) {
	lp.failed(attempt, err, delay, false)
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
		lp.failing, lp.since, lp.reminder = true, now, FirstReminder
		first = true
	} else if downtime = now.Sub(lp.since); downtime >= lp.reminder {
		remind = true
		for lp.reminder <= downtime {
			lp.reminder += min(lp.reminder, MaxReminderInterval)
		}
	}
	lp.mu.Unlock()

	// Check first, so that the hot (Debug, disabled) path builds no fields.
	switch {
	case first:
		if ce := lp.log.Check(zapcore.WarnLevel, MsgFailing); ce != nil {
			write(ce, viaObserve, zap.Int("attempt", attempt), zap.Duration("delay", delay), zap.Error(err))
		}
	case remind:
		if ce := lp.log.Check(zapcore.WarnLevel, MsgStillFailing); ce != nil {
			write(ce, viaObserve, zap.Int("attempt", attempt), zap.Duration("delay", delay),
				zap.Duration("downtime", downtime), zap.Error(err))
		}
	default:
		if ce := lp.log.Check(zapcore.DebugLevel, MsgRetry); ce != nil {
			write(ce, viaObserve, zap.Int("attempt", attempt), zap.Duration("delay", delay), zap.Error(err))
		}
	}
}

// Succeeded records that the loop succeeded after attempts attempts (the
// successful one included). After failures it logs MsgRecovered at Info
// with attempts and the downtime, and ends the outage; otherwise it logs
// MsgSucceeded at Debug.
func (lp *Loop) Succeeded(attempts int) { lp.succeeded(attempts, false) }

func (lp *Loop) succeeded(attempts int, viaObserve bool) {
	if lp == nil || lp.log == nil {
		return
	}
	wasFailing, downtime := lp.end()
	if !wasFailing {
		if ce := lp.log.Check(zapcore.DebugLevel, MsgSucceeded); ce != nil {
			write(ce, viaObserve, zap.Int("attempts", attempts))
		}
		return
	}
	if ce := lp.log.Check(zapcore.InfoLevel, MsgRecovered); ce != nil {
		write(ce, viaObserve, zap.Int("attempts", attempts), zap.Duration("downtime", downtime))
	}
}

// GaveUp records that the loop stopped for good after attempts attempts,
// with err. It logs MsgGaveUp at Error with attempts, the downtime (0 if
// the loop was not failing before, e.g. a permanent error on the first
// attempt) and err, and ends the outage.
//
// If err is or wraps context.Canceled, the loop's owner stopped it (a
// Close, a shutdown): that is no failure, and GaveUp logs MsgStopped at
// Info with the same fields instead. context.DeadlineExceeded is a give-up.
func (lp *Loop) GaveUp(attempts int, err error) { lp.gaveUp(attempts, err, false) }

func (lp *Loop) gaveUp(attempts int, err error, viaObserve bool) {
	if lp == nil || lp.log == nil {
		return
	}
	_, downtime := lp.end()
	lvl, msg := zapcore.ErrorLevel, MsgGaveUp
	if errors.Is(err, context.Canceled) {
		lvl, msg = zapcore.InfoLevel, MsgStopped
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
