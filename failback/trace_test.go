package failback

import (
	"testing"
	"testing/synctest"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/cluster"
)

func spanAttrs(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		m[kv.Key] = kv.Value
	}
	return m
}

// A call retried in the background is traced attempt by attempt: the first
// attempt under the caller's span, each retry a root linked to it, also
// after a restart from a Store.
func TestTracerProviderLinksRetriesToTheQueuingTrace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
		st := newMemStore()
		pol := WithPolicy(rebound.Policy{Initial: time.Second, Max: time.Second, Jitter: rebound.NoJitter}, rebound.WithTracerProvider(tp))
		f := mustNew(t, cluster.NewStaticDirectory(newProvider("a:1", alwaysFail(errRefused))), WithStore(st, nil), pol)
		ctx, caller := tp.Tracer("test").Start(callerCtx(), "caller")
		inv := &cluster.Invocation{Method: "m"}
		if _, err := f.Invoke(ctx, inv); err != nil {
			t.Fatal(err)
		}
		caller.End()
		if _, ok := inv.Attachments[traceContextKey]; ok {
			t.Fatal("the caller's Invocation was modified")
		}
		time.Sleep(1500 * time.Millisecond) // one retry fails
		synctest.Wait()
		mustClose(t, f)

		up := newProvider("a:1", nil)
		g := mustNew(t, cluster.NewStaticDirectory(up), WithStore(st, nil), pol)
		defer mustClose(t, g)
		time.Sleep(time.Minute)
		synctest.Wait()
		if len(up.snapshot()) != 1 {
			t.Fatalf("%d attempts after the restart, want 1", len(up.snapshot()))
		}
		var attempts []sdktrace.ReadOnlySpan
		for _, s := range rec.Ended() {
			if s.Name() == "rebound.attempt" {
				attempts = append(attempts, s)
			}
		}
		if len(attempts) != 3 {
			t.Fatalf("%d attempt spans, want 3 (first, a failed retry, the retry after the restart)", len(attempts))
		}
		first := attempts[0]
		if first.Parent().SpanID() != caller.SpanContext().SpanID() {
			t.Error("the first attempt's span is not under the caller's")
		}
		wantVerdict := []string{"retry", "retry", "success"}
		for i, s := range attempts {
			a := spanAttrs(s)
			if a["rebound.attempt"].AsInt64() != int64(i+1) || a["rebound.verdict"].AsString() != wantVerdict[i] {
				t.Errorf("span %d: %v; want attempt %d verdict %s", i, a, i+1, wantVerdict[i])
			}
			if i == 0 {
				continue
			}
			if s.Parent().IsValid() || len(s.Links()) != 1 || s.Links()[0].SpanContext.SpanID() != first.SpanContext().SpanID() {
				t.Errorf("retry span %d: parent %v, links %v; want a root linked to the first attempt", i, s.Parent(), s.Links())
			}
		}
		if w := spanAttrs(attempts[1])["rebound.attempt.wait"].AsFloat64(); w != 1 {
			t.Errorf("wait before the first retry %v s, want 1", w)
		}
	})
}
