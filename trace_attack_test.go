package rebound_test

import (
	"context"
	"errors"
	"testing"
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
	r, err := rebound.NewRetrier(rebound.Policy{Initial: time.Millisecond, MaxAttempts: 3},
		rebound.WithTracerProvider(tp),
		rebound.WithObserver(rebound.Hooks{Retried: func(rebound.Event) { panic("hook") }}))
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
