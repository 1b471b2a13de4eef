package logging_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"runtime"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/internal/admit"
	"github.com/rebound-go/rebound/logging"
)

var errBoom = errors.New("registry unreachable")

// newObserved returns a logger writing into an observer core at lvl.
func newObserved(lvl zapcore.Level) (*zap.Logger, *observer.ObservedLogs) {
	core, logs := observer.New(lvl)
	return zap.New(core), logs
}

// advance moves a synctest bubble's fake clock forward by d. Inside a
// bubble time.Sleep returns as soon as every goroutine is blocked: no real
// time passes.
func advance(d time.Duration) { time.Sleep(d) }

// wantEntry asserts one observed line: level, message and exactly these
// fields (as zapcore.MapObjectEncoder records them: ints as int64,
// durations as time.Duration, errors as their text).
func wantEntry(t *testing.T, got observer.LoggedEntry, lvl zapcore.Level, msg string, fields map[string]any) {
	t.Helper()
	if got.Level != lvl || got.Message != msg {
		t.Errorf("entry = %v %q, want %v %q", got.Level, got.Message, lvl, msg)
	}
	if cm := got.ContextMap(); !reflect.DeepEqual(cm, fields) {
		t.Errorf("%q fields =\n  %#v\nwant\n  %#v", msg, cm, fields)
	}
}

// fields merges the fields every line of the loops under test carries.
func fields(extra map[string]any) map[string]any {
	m := map[string]any{"component": "subscriber", "key": "DEFAULT_GROUP@@orders"}
	for k, v := range extra {
		m[k] = v
	}
	return m
}

func TestLoopLogsOneOutage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, logs := newObserved(zapcore.DebugLevel)
		lp := logging.NewLoop(l, "subscriber", zap.String("key", "DEFAULT_GROUP@@orders"))

		lp.Failed(1, errBoom, time.Second) // t=0: outage starts
		advance(time.Second)
		lp.Failed(2, errBoom, 2*time.Second) // t=1s
		advance(59 * time.Second)
		lp.Failed(3, errBoom, 4*time.Second) // t=60s: first reminder due
		advance(4 * time.Second)
		lp.Failed(4, errBoom, 8*time.Second) // t=64s: next reminder at 2m
		advance(8 * time.Second)
		lp.Succeeded(5) // t=72s

		entries := logs.TakeAll()
		if len(entries) != 5 {
			t.Fatalf("got %d lines, want 5: %v", len(entries), entries)
		}
		wantEntry(t, entries[0], zapcore.WarnLevel, logging.MsgFailing, fields(map[string]any{
			"attempt": int64(1), "delay": time.Second, "error": errBoom.Error(),
		}))
		wantEntry(t, entries[1], zapcore.DebugLevel, logging.MsgRetry, fields(map[string]any{
			"attempt": int64(2), "delay": 2 * time.Second, "error": errBoom.Error(),
		}))
		wantEntry(t, entries[2], zapcore.WarnLevel, logging.MsgStillFailing, fields(map[string]any{
			"attempt": int64(3), "delay": 4 * time.Second, "downtime": time.Minute, "error": errBoom.Error(),
		}))
		wantEntry(t, entries[3], zapcore.DebugLevel, logging.MsgRetry, fields(map[string]any{
			"attempt": int64(4), "delay": 8 * time.Second, "error": errBoom.Error(),
		}))
		wantEntry(t, entries[4], zapcore.InfoLevel, logging.MsgRecovered, fields(map[string]any{
			"attempts": int64(5), "downtime": 72 * time.Second,
		}))

		// The state was reset: a later outage is announced again, with its
		// own downtime, and a give-up ends it.
		advance(time.Hour)
		lp.Failed(1, errBoom, time.Second)
		advance(90 * time.Second)
		lp.Failed(2, errBoom, time.Second) // downtime 90s: reminder (1m) due
		lp.GaveUp(2, errBoom)
		advance(time.Minute)
		lp.Failed(1, errBoom, time.Second) // new outage after the give-up

		entries = logs.TakeAll()
		if len(entries) != 4 {
			t.Fatalf("got %d lines, want 4: %v", len(entries), entries)
		}
		wantEntry(t, entries[0], zapcore.WarnLevel, logging.MsgFailing, fields(map[string]any{
			"attempt": int64(1), "delay": time.Second, "error": errBoom.Error(),
		}))
		wantEntry(t, entries[1], zapcore.WarnLevel, logging.MsgStillFailing, fields(map[string]any{
			"attempt": int64(2), "delay": time.Second, "downtime": 90 * time.Second, "error": errBoom.Error(),
		}))
		wantEntry(t, entries[2], zapcore.ErrorLevel, logging.MsgGaveUp, fields(map[string]any{
			"attempts": int64(2), "downtime": 90 * time.Second, "error": errBoom.Error(),
		}))
		wantEntry(t, entries[3], zapcore.WarnLevel, logging.MsgFailing, fields(map[string]any{
			"attempt": int64(1), "delay": time.Second, "error": errBoom.Error(),
		}))
	})
}

func TestLoopSuccessWithoutFailureIsDebugOnly(t *testing.T) {
	l, logs := newObserved(zapcore.DebugLevel)
	lp := logging.NewLoop(l, "subscriber", zap.String("key", "DEFAULT_GROUP@@orders"))
	lp.Succeeded(1)
	lp.Observe(rebound.Event{Kind: rebound.EventAttempt, Attempt: 1})
	entries := logs.TakeAll()
	if len(entries) != 2 {
		t.Fatalf("got %d lines, want 2: %v", len(entries), entries)
	}
	for _, e := range entries {
		wantEntry(t, e, zapcore.DebugLevel, logging.MsgSucceeded, fields(map[string]any{"attempts": int64(1)}))
	}

	// With a production (Info) logger: nothing at all.
	l, logs = newObserved(zapcore.InfoLevel)
	lp = logging.NewLoop(l, "subscriber")
	lp.Succeeded(1)
	if n := logs.Len(); n != 0 {
		t.Errorf("success without failure wrote %d lines at Info, want 0: %v", n, logs.All())
	}
}

func TestLoopGiveUpWithoutFailure(t *testing.T) {
	l, logs := newObserved(zapcore.DebugLevel)
	lp := logging.NewLoop(l, "failback", zap.String("target", "10.0.0.7:20880"))
	lp.Observe(rebound.Event{Kind: rebound.EventGiveUp, Attempt: 1, Err: errBoom})
	entries := logs.TakeAll()
	if len(entries) != 1 {
		t.Fatalf("got %d lines, want 1: %v", len(entries), entries)
	}
	wantEntry(t, entries[0], zapcore.ErrorLevel, logging.MsgGaveUp, map[string]any{
		"component": "failback", "target": "10.0.0.7:20880",
		"attempts": int64(1), "downtime": time.Duration(0), "error": errBoom.Error(),
	})
}

func TestLoopIgnoresUnknownEvents(t *testing.T) {
	l, logs := newObserved(zapcore.DebugLevel)
	lp := logging.NewLoop(l, "")
	lp.Observe(rebound.Event{})
	lp.Observe(rebound.Event{Kind: rebound.EventKind(99), Attempt: 3, Err: errBoom})
	if n := logs.Len(); n != 0 {
		t.Errorf("unknown events wrote %d lines: %v", n, logs.All())
	}
	// An empty component is omitted.
	lp.Failed(1, errBoom, time.Second)
	wantEntry(t, logs.TakeAll()[0], zapcore.WarnLevel, logging.MsgFailing, map[string]any{
		"attempt": int64(1), "delay": time.Second, "error": errBoom.Error(),
	})
}

// An hour of failures at a 30 s cap writes a handful of lines at Warn and
// above, not 120.
func TestLoopHourOutageIsAHandfulOfLines(t *testing.T) {
	count := func(entries []observer.LoggedEntry) map[zapcore.Level]int {
		n := map[zapcore.Level]int{}
		for _, e := range entries {
			n[e.Level]++
		}
		return n
	}
	warnPlus := func(n map[zapcore.Level]int) int {
		return n[zapcore.WarnLevel] + n[zapcore.ErrorLevel] + n[zapcore.DPanicLevel]
	}

	t.Run("fixed 30s", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l, logs := newObserved(zapcore.DebugLevel)
			lp := logging.NewLoop(l, "subscriber", zap.String("key", "DEFAULT_GROUP@@orders"))
			// Attempts at t = 0, 30s, ..., 3600s; the last one succeeds.
			for i := 0; i < 120; i++ {
				lp.Failed(i+1, errBoom, 30*time.Second)
				advance(30 * time.Second)
			}
			lp.Succeeded(121)

			entries := logs.All()
			n := count(entries)
			if got := warnPlus(n); got > 8 {
				t.Errorf("%d lines at Warn and above, want a handful (<= 8)", got)
			}
			// Exactly: the first failure, reminders at 1, 2, 4, 8, 16 and
			// 32 minutes of downtime; one recovery; the rest at Debug.
			if n[zapcore.WarnLevel] != 7 || n[zapcore.InfoLevel] != 1 || n[zapcore.DebugLevel] != 113 || len(entries) != 121 {
				t.Errorf("lines per level = %v (total %d), want 7 Warn, 1 Info, 113 Debug", n, len(entries))
			}
			var reminders []time.Duration
			for _, e := range logs.FilterMessage(logging.MsgStillFailing).All() {
				reminders = append(reminders, e.ContextMap()["downtime"].(time.Duration))
			}
			want := []time.Duration{time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute, 16 * time.Minute, 32 * time.Minute}
			if !reflect.DeepEqual(reminders, want) {
				t.Errorf("reminders at downtime %v, want %v", reminders, want)
			}
			last := entries[len(entries)-1]
			wantEntry(t, last, zapcore.InfoLevel, logging.MsgRecovered, fields(map[string]any{
				"attempts": int64(121), "downtime": time.Hour,
			}))
		})
	})

	t.Run("rebound.Retry default policy", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l, logs := newObserved(zapcore.DebugLevel)
			start := time.Now()
			op := func(context.Context) error {
				if time.Since(start) < time.Hour {
					return errBoom
				}
				return nil
			}
			// The zero Policy: 1s doubling, capped at 30s, full jitter.
			err := rebound.Retry(t.Context(), rebound.Policy{}, op,
				admit.Seed(7).(rebound.Option),
				rebound.WithObserver(logging.NewLoop(l, "subscriber", zap.String("key", "DEFAULT_GROUP@@orders"))))
			if err != nil {
				t.Fatalf("Retry: %v", err)
			}
			entries := logs.All()
			n := count(entries)
			t.Logf("lines per level: %v", n)
			if got := warnPlus(n); got > 8 || n[zapcore.WarnLevel] < 2 {
				t.Errorf("%d lines at Warn and above (%v), want a handful (2..8)", got, n)
			}
			if n[zapcore.DebugLevel] < 120 {
				t.Errorf("only %d Debug lines for an hour of full-jitter retries", n[zapcore.DebugLevel])
			}
			last := entries[len(entries)-1]
			if last.Level != zapcore.InfoLevel || last.Message != logging.MsgRecovered {
				t.Fatalf("last line = %v %q, want the recovery", last.Level, last.Message)
			}
			// Downtime counts from the first failure (t=0) to the success.
			if d := last.ContextMap()["downtime"].(time.Duration); d < time.Hour || d > time.Hour+30*time.Second {
				t.Errorf("downtime = %v, want [1h, 1h30s]", d)
			}
			if a := last.ContextMap()["attempts"].(int64); a != int64(len(entries)) {
				t.Errorf("attempts = %d, want %d (one line per failure plus the recovery)", a, len(entries))
			}
		})
	})
}

// Reminders follow the downtime doubling until their spacing reaches
// an hour, then come once an hour.
func TestLoopReminderSpacingIsCapped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, logs := newObserved(zapcore.WarnLevel)
		lp := logging.NewLoop(l, "failback")
		for i := 0; i <= 60; i++ { // a failure every 10 minutes for 10 hours
			lp.Failed(i+1, errBoom, 10*time.Minute)
			advance(10 * time.Minute)
		}
		var got []time.Duration
		for _, e := range logs.FilterMessage(logging.MsgStillFailing).All() {
			got = append(got, e.ContextMap()["downtime"].(time.Duration)/time.Minute)
		}
		// Due at 1, 2, 4, 8, 16, 32, 64 minutes, then every 60: 124, 184, ...
		// Each fires at the first failure (every 10 minutes) at or after it.
		want := []time.Duration{10, 20, 40, 70, 130, 190, 250, 310, 370, 430, 490, 550}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("reminders at downtime (minutes) %v, want %v", got, want)
		}
		if n := logs.FilterMessage(logging.MsgFailing).Len(); n != 1 {
			t.Errorf("%d %q lines, want 1", n, logging.MsgFailing)
		}
	})
}

// A Loop hooked into rebound.Retry logs its events: recovery, a permanent
// error, exhaustion.
func TestRetryObserverWithRetry(t *testing.T) {
	policy := rebound.Policy{Initial: time.Second, Max: time.Second, Jitter: rebound.NoJitter}

	t.Run("recovers", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l, logs := newObserved(zapcore.DebugLevel)
			calls := 0
			err := rebound.Retry(t.Context(), policy, func(context.Context) error {
				if calls++; calls < 3 {
					return errBoom
				}
				return nil
			}, rebound.WithObserver(logging.NewLoop(l, "subscriber", zap.String("key", "DEFAULT_GROUP@@orders"))))
			if err != nil {
				t.Fatalf("Retry: %v", err)
			}
			entries := logs.TakeAll()
			if len(entries) != 3 {
				t.Fatalf("got %d lines, want 3: %v", len(entries), entries)
			}
			wantEntry(t, entries[0], zapcore.WarnLevel, logging.MsgFailing, fields(map[string]any{
				"attempt": int64(1), "delay": time.Second, "error": errBoom.Error(),
			}))
			wantEntry(t, entries[1], zapcore.DebugLevel, logging.MsgRetry, fields(map[string]any{
				"attempt": int64(2), "delay": time.Second, "error": errBoom.Error(),
			}))
			wantEntry(t, entries[2], zapcore.InfoLevel, logging.MsgRecovered, fields(map[string]any{
				"attempts": int64(3), "downtime": 2 * time.Second,
			}))
		})
	})

	t.Run("permanent error", func(t *testing.T) {
		l, logs := newObserved(zapcore.DebugLevel)
		bad := errors.New("service name is empty")
		err := rebound.Retry(t.Context(), policy, func(context.Context) error {
			return rebound.Permanent(bad)
		}, rebound.WithObserver(logging.NewLoop(l, "subscriber", zap.String("key", "DEFAULT_GROUP@@orders"))))
		if !errors.Is(err, bad) {
			t.Fatalf("Retry = %v, want %v", err, bad)
		}
		entries := logs.TakeAll()
		if len(entries) != 1 {
			t.Fatalf("got %d lines, want 1: %v", len(entries), entries)
		}
		wantEntry(t, entries[0], zapcore.ErrorLevel, logging.MsgGaveUp, fields(map[string]any{
			"attempts": int64(1), "downtime": time.Duration(0), "error": bad.Error(),
		}))
	})

	t.Run("exhausted", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l, logs := newObserved(zapcore.InfoLevel)
			err := rebound.Retry(t.Context(), policy, func(context.Context) error { return errBoom },
				rebound.WithObserver(logging.NewLoop(l, "failback", zap.String("target", "10.0.0.7:20880"))), rebound.WithMaxAttempts(4))
			if !errors.Is(err, rebound.ErrExhausted) {
				t.Fatalf("Retry = %v, want ErrExhausted", err)
			}
			entries := logs.TakeAll()
			if len(entries) != 2 {
				t.Fatalf("got %d lines at Info+, want 2: %v", len(entries), entries)
			}
			wantEntry(t, entries[0], zapcore.WarnLevel, logging.MsgFailing, map[string]any{
				"component": "failback", "target": "10.0.0.7:20880",
				"attempt": int64(1), "delay": time.Second, "error": errBoom.Error(),
			})
			wantEntry(t, entries[1], zapcore.ErrorLevel, logging.MsgGaveUp, map[string]any{
				"component": "failback", "target": "10.0.0.7:20880",
				"attempts": int64(4), "downtime": 3 * time.Second, "error": err.Error(),
			})
		})
	})
}

// Cancellation is the owner stopping the loop, not a failure: Info, not
// Error. A deadline is a give-up.
func TestRetryObserverCancelledAndDeadline(t *testing.T) {
	policy := rebound.Policy{Initial: time.Second, Max: time.Second, Jitter: rebound.NoJitter}

	t.Run("cancelled", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l, logs := newObserved(zapcore.InfoLevel)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			calls := 0
			err := rebound.Retry(ctx, policy, func(context.Context) error {
				if calls++; calls == 3 {
					cancel() // e.g. Manager.Close while the attempt runs
				}
				return errBoom
			}, rebound.WithObserver(logging.NewLoop(l, "subscriber", zap.String("key", "DEFAULT_GROUP@@orders"))))
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("Retry = %v, want context.Canceled", err)
			}
			entries := logs.TakeAll()
			if len(entries) != 2 {
				t.Fatalf("got %d lines, want 2: %v", len(entries), entries)
			}
			wantEntry(t, entries[1], zapcore.InfoLevel, logging.MsgStopped, fields(map[string]any{
				"attempts": int64(3), "downtime": 2 * time.Second, "error": err.Error(),
			}))
		})
	})

	t.Run("deadline", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l, logs := newObserved(zapcore.InfoLevel)
			ctx, cancel := context.WithTimeout(t.Context(), 2500*time.Millisecond)
			defer cancel()
			err := rebound.Retry(ctx, policy, func(context.Context) error { return errBoom },
				rebound.WithObserver(logging.NewLoop(l, "subscriber", zap.String("key", "DEFAULT_GROUP@@orders"))))
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Retry = %v, want context.DeadlineExceeded", err)
			}
			entries := logs.TakeAll()
			if len(entries) != 2 {
				t.Fatalf("got %d lines, want 2: %v", len(entries), entries)
			}
			wantEntry(t, entries[1], zapcore.ErrorLevel, logging.MsgGaveUp, fields(map[string]any{
				"attempts": int64(3), "downtime": 2 * time.Second, "error": err.Error(),
			}))
		})
	})
}

// Every NewLoop call has its own state.
func TestRetryObserverLoopsAreIndependent(t *testing.T) {
	l, logs := newObserved(zapcore.WarnLevel)
	a := logging.NewLoop(l, "subscriber", zap.String("key", "a"))
	b := logging.NewLoop(l, "subscriber", zap.String("key", "b"))
	a.Observe(rebound.Event{Kind: rebound.EventRetry, Attempt: 1, Err: errBoom, Delay: time.Second})
	b.Observe(rebound.Event{Kind: rebound.EventRetry, Attempt: 1, Err: errBoom, Delay: time.Second})
	a.Observe(rebound.Event{Kind: rebound.EventRetry, Attempt: 2, Err: errBoom, Delay: time.Second})
	if got := logs.FilterMessage(logging.MsgFailing).Len(); got != 2 {
		t.Errorf("%d %q lines, want one per loop (2)", got, logging.MsgFailing)
	}
}

func TestLoopNilAndZeroLogNothing(t *testing.T) {
	var nilLoop *logging.Loop
	var zero logging.Loop
	for _, lp := range []*logging.Loop{nilLoop, &zero, logging.NewLoop(nil, "x")} {
		lp.Failed(1, errBoom, time.Second)
		lp.Observe(rebound.Event{Kind: rebound.EventRetry, Attempt: 2, Err: errBoom})
		lp.Succeeded(3)
		lp.GaveUp(4, errBoom)
	}
	logging.NewLoop(nil, "x").Observe(rebound.Event{Kind: rebound.EventGiveUp, Attempt: 1, Err: errBoom})
}

func TestLoopRedactsItsFields(t *testing.T) {
	l, logs := newObserved(zapcore.DebugLevel)
	lp := logging.NewLoop(l, "subscriber", zap.String("key", "DEFAULT_GROUP@@orders"), zap.String("accessKey", "AKIDEXAMPLE"))
	lp.Failed(1, errBoom, time.Second)
	wantEntry(t, logs.TakeAll()[0], zapcore.WarnLevel, logging.MsgFailing, fields(map[string]any{
		"accessKey": logging.RedactedValue, "attempt": int64(1), "delay": time.Second, "error": errBoom.Error(),
	}))
}

// Concurrent use from many goroutines (run with -race): every call writes
// exactly one line and the outage transitions pair up.
func TestLoopConcurrentUse(t *testing.T) {
	l, logs := newObserved(zapcore.DebugLevel)
	lp := logging.NewLoop(l, "failback")
	const goroutines, calls = 8, 200
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range calls {
				switch (g + i) % 5 {
				case 0:
					lp.Succeeded(i)
				case 1:
					lp.Observe(rebound.Event{Kind: rebound.EventRetry, Attempt: i, Err: errBoom, Delay: time.Second})
				default:
					lp.Failed(i, fmt.Errorf("attempt %d: %w", i, errBoom), time.Second)
				}
			}
		})
	}
	wg.Wait()
	lp.Succeeded(1)

	if got, want := logs.Len(), goroutines*calls+1; got != want {
		t.Errorf("%d lines, want one per call (%d)", got, want)
	}
	failing := logs.FilterMessage(logging.MsgFailing).Len()
	recovered := logs.FilterMessage(logging.MsgRecovered).Len()
	if failing == 0 || failing != recovered {
		t.Errorf("%d %q vs %d %q lines: want equal and > 0", failing, logging.MsgFailing, recovered, logging.MsgRecovered)
	}
}

// Every line reports the caller that matters: the code that called a Loop
// method, or for Notify the code that called rebound.Retry (not
// logging/loop.go, not the retry loop inside package rebound).
func TestLoopCaller(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	l := zap.New(core, zap.AddCaller())
	_, file, line, _ := runtime.Caller(0)
	lp := logging.NewLoop(l, "subscriber")
	lp.Failed(1, errBoom, time.Second) // line+2
	lp.Succeeded(2)                    // line+3
	lp.GaveUp(3, errBoom)              // line+4
	calls := 0
	_ = rebound.Retry(t.Context(), rebound.Policy{Initial: time.Millisecond, Max: time.Millisecond}, func(context.Context) error { // line+6
		if calls++; calls < 2 {
			return errBoom
		}
		return nil
	}, rebound.WithObserver(logging.NewLoop(l, "sync")))
	want := []int{line + 2, line + 3, line + 4, line + 6, line + 6}
	got := logs.All()
	if len(got) != len(want) {
		t.Fatalf("%d lines, want %d", len(got), len(want))
	}
	for i, e := range got {
		if !e.Caller.Defined || e.Caller.File != file || e.Caller.Line != want[i] {
			t.Errorf("%q: caller %s, want %s:%d", e.Message, e.Caller.String(), filepath.Base(file), want[i])
		}
	}
}
