package failback

import (
	"testing"
	"testing/synctest"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/cluster"
)

// A retry's link carries the queuing span's W3C tracestate as well as its
// traceparent: a vendor's state (sampling, tenant) is not lost on a retry.
func TestRetryLinkKeepsTraceState(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
		pol := WithPolicy(rebound.Policy{Initial: time.Second, Max: time.Second, Jitter: rebound.NoJitter})
		f := mustNew(t, cluster.NewStaticDirectory(newProvider("a:1", alwaysFail(errRefused))), pol, WithTracerProvider(tp))
		ts, err := trace.ParseTraceState("vendor=x")
		if err != nil {
			t.Fatal(err)
		}
		remote := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2},
			TraceFlags: trace.FlagsSampled, TraceState: ts, Remote: true})
		ctx, caller := tp.Tracer("test").Start(trace.ContextWithRemoteSpanContext(callerCtx(), remote), "caller")
		if _, err := f.Invoke(ctx, &cluster.Invocation{Method: "m"}); err != nil {
			t.Fatal(err)
		}
		caller.End()
		time.Sleep(1500 * time.Millisecond) // one retry
		synctest.Wait()
		mustClose(t, f)
		var retry sdktrace.ReadOnlySpan
		for _, s := range rec.Ended() {
			if s.Name() == spanAttempt && len(s.Links()) == 1 {
				retry = s
			}
		}
		if retry == nil {
			t.Fatal("no retry span with a link")
		}
		if got := retry.Links()[0].SpanContext.TraceState().String(); got != "vendor=x" {
			t.Fatalf("the retry's link has tracestate %q, want %q", got, "vendor=x")
		}
	})
}
