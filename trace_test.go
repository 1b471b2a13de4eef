package rebound_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/rebound-go/rebound"
)

func attrs(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		m[kv.Key] = kv.Value
	}
	return m
}

func TestTracerProviderSpanPerAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
		ctx, parent := tp.Tracer("test").Start(context.Background(), "caller")
		r, err := rebound.NewRetrier(rebound.Policy{Initial: time.Second, Jitter: rebound.NoJitter},
			rebound.WithTracerProvider(tp), rebound.WithMaxAttempts(5))
		if err != nil {
			t.Fatal(err)
		}
		errBusy := errors.New("busy")
		n := 0
		err = r.Do(ctx, func(ctx context.Context) error {
			n++
			if !trace.SpanFromContext(ctx).SpanContext().IsValid() {
				t.Error("the attempt's context has no span")
			}
			switch n {
			case 1:
				return errBusy
			case 2:
				return rebound.RetryAfter(3*time.Second, errBusy)
			}
			return nil
		})
		parent.End()
		if err != nil {
			t.Fatal(err)
		}
		spans := rec.Ended()
		if len(spans) != 4 {
			t.Fatalf("%d spans, want 3 attempts and the caller", len(spans))
		}
		want := []struct {
			wait           float64
			class, verdict string
		}{{0, "transient", "retry"}, {1, "retry_after", "retry"}, {3, "", "success"}}
		for i, w := range want {
			s := spans[i]
			a := attrs(s)
			if s.Name() != "rebound.attempt" || s.Parent().SpanID() != parent.SpanContext().SpanID() {
				t.Errorf("span %d: %q under %v, want rebound.attempt under the caller", i, s.Name(), s.Parent().SpanID())
			}
			if a["rebound.attempt"].AsInt64() != int64(i+1) || a["rebound.attempt.wait"].AsFloat64() != w.wait ||
				a["rebound.error.class"].AsString() != w.class || a["rebound.verdict"].AsString() != w.verdict {
				t.Errorf("span %d: %v, want attempt %d wait %v class %q verdict %q", i, a, i+1, w.wait, w.class, w.verdict)
			}
			if s.EndTime().Sub(s.StartTime()) != 0 {
				t.Errorf("span %d lasts %v: it should end with its attempt, not after the wait", i, s.EndTime().Sub(s.StartTime()))
			}
		}
	})
}

func TestTracerProviderStopVerdict(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	err := rebound.Retry(context.Background(), rebound.Policy{}, func(context.Context) error {
		return rebound.Permanent(errors.New("no"))
	}, rebound.WithTracerProvider(tp))
	if err == nil {
		t.Fatal("no error")
	}
	spans := rec.Ended()
	if len(spans) != 1 {
		t.Fatalf("%d spans", len(spans))
	}
	a := attrs(spans[0])
	if a["rebound.verdict"].AsString() != "stop" || a["rebound.error.class"].AsString() != "permanent" {
		t.Fatalf("%v", a)
	}
	if rebound.WithTracerProvider(nil) != nil {
		t.Fatal("WithTracerProvider(nil) is not the nil option")
	}
}

func TestNoTracerProviderNoAllocation(t *testing.T) {
	r, _ := rebound.NewRetrier(rebound.Policy{})
	op := func(context.Context) error { return nil }
	ctx := context.Background()
	if n := testing.AllocsPerRun(100, func() { _ = r.Do(ctx, op) }); n != 0 {
		t.Fatalf("%v allocs per Do without a tracer provider", n)
	}
}

// BenchmarkTrace measures one successful attempt: without a provider,
// with rebound's span per attempt, with the SDK's own span carrying the
// same attributes (the target), and the alternative of an event on the
// caller's span.
func BenchmarkTrace(b *testing.B) {
	tp := sdktrace.NewTracerProvider() // records, exports nothing
	ctx, parent := tp.Tracer("bench").Start(context.Background(), "caller")
	defer parent.End()
	op := func(context.Context) error { return nil }
	plain, _ := rebound.NewRetrier(rebound.Policy{})
	traced, _ := rebound.NewRetrier(rebound.Policy{}, rebound.WithTracerProvider(tp))
	tr := tp.Tracer("bench")
	b.Run("no-provider", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = plain.Do(ctx, op)
		}
	})
	b.Run("span-per-attempt", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = traced.Do(ctx, op)
		}
	})
	b.Run("sdk-span", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			c, s := tr.Start(ctx, "rebound.attempt", trace.WithAttributes(
				attribute.Int("rebound.attempt", 1), attribute.Float64("rebound.attempt.wait", 0)))
			_ = op(c)
			s.SetAttributes(attribute.String("rebound.verdict", "success"))
			s.End()
		}
	})
	b.Run("sdk-span-bare", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			c, s := tr.Start(ctx, "rebound.attempt")
			_ = op(c)
			s.End()
		}
	})
	b.Run("event-on-caller", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = plain.Do(ctx, op)
			trace.SpanFromContext(ctx).AddEvent("rebound.attempt", trace.WithAttributes(
				attribute.Int("rebound.attempt", 1), attribute.Float64("rebound.attempt.wait", 0),
				attribute.String("rebound.verdict", "success")))
		}
	})
}
