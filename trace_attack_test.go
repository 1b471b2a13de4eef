package rebound_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/rebound-go/rebound"
)

// A hook that panics after a failed attempt (the panic goes on through Do)
// must not leave that attempt's span open.
func TestTracedAttemptSpanEndsWhenAHookPanics(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	r, err := rebound.NewRetrier(rebound.Policy{Initial: time.Millisecond},
		rebound.WithTracerProvider(tp),
		rebound.WithObserver(rebound.Hooks{Retried: func(rebound.Event) { panic("hook") }}), rebound.WithMaxAttempts(3))
	if err != nil {
		t.Fatal(err)
	}
	func() {
		defer func() {
			if p := recover(); p != "hook" {
				t.Fatalf("recovered %v, want the hook's panic", p)
			}
		}()
		r.Do(context.Background(), func(context.Context) error { return errors.New("busy") })
	}()
	if s, e := len(rec.Started()), len(rec.Ended()); s != 1 || e != 1 {
		t.Fatalf("%d spans started, %d ended; want the one attempt's span ended", s, e)
	}
}

// A context cancelled during the wait after a failed attempt, or an op
// that panics, leaves no attempt span open.
func TestTracedSpansEndOnCancelAndPanic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
		r, err := rebound.NewRetrier(rebound.Policy{Initial: time.Hour, Jitter: rebound.NoJitter}, rebound.WithTracerProvider(tp))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		go func() { time.Sleep(time.Minute); cancel() }()
		if err := r.Do(ctx, func(context.Context) error { return errors.New("busy") }); !errors.Is(err, context.Canceled) {
			t.Fatalf("Do: %v, want the context's cancellation", err)
		}
		func() {
			defer func() { recover() }()
			r.Do(context.Background(), func(context.Context) error { panic("op") })
		}()
		if s, e := len(rec.Started()), len(rec.Ended()); s != 2 || e != 2 {
			t.Fatalf("%d spans started, %d ended; want 2 and 2", s, e)
		}
	})
}
