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
		pol := WithPolicy(rebound.Policy{Initial: time.Second, Max: time.Second, Jitter: rebound.NoJitter}, rebound.WithTracerProvider(tp))
		f := mustNew(t, cluster.NewStaticDirectory(newProvider("a:1", alwaysFail(errRefused))), pol)
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

// A stored call's trace attachments are data from disk or from the caller:
// malformed or hostile values give no link and no panic; a well-formed one
// links to what it names.
func TestQueuedByMalformedAttachments(t *testing.T) {
	bad := []string{
		"garbage", "00-", "00-00000000000000000000000000000000-0000000000000000-01",
		"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\r\nX-Injected: 1",
		"ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
		"00-0AF7651916CD43DD8448EB211C80319C-B7AD6B7169203331-01",
		string(make([]byte, 1<<16)),
	}
	for _, v := range bad {
		inv := &cluster.Invocation{Attachments: map[string]string{traceContextKey: v + " =,=\x00"}}
		if sc := queuedBy(inv); sc.IsValid() {
			t.Errorf("traceparent %.40q gave a link to %v", v, sc)
		}
	}
	good := "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	inv := &cluster.Invocation{Attachments: map[string]string{traceContextKey: good + " =,=\x00"}}
	if sc := queuedBy(inv); !sc.IsValid() || sc.TraceState().Len() != 0 {
		t.Errorf("a good traceparent with a malformed tracestate gave %v (tracestate %q), want the link without the state", sc, sc.TraceState())
	}
}
