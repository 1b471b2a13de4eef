package reboundhttp_test

import (
	"net/http"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/reboundhttp"
)

// TestTracesEachAttempt: with rebound.WithTracerProvider, each attempt of
// a request is a span under the caller's, and the base transport gets the
// attempt's context (where otelhttp would put its client span).
func TestTracesEachAttempt(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	s := &server{statuses: []int{503}}
	ts := start(t, s)
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	var seen []trace.SpanID
	spy := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		seen = append(seen, trace.SpanFromContext(r.Context()).SpanContext().SpanID())
		return base.RoundTrip(r)
	})
	rt := newTransport(t, spy, fast, fastLimit, reboundhttp.WithOptions(rebound.WithTracerProvider(tp)))
	ctx, parent := tp.Tracer("test").Start(t.Context(), "caller")
	req, _ := http.NewRequestWithContext(ctx, "GET", ts.URL, nil)
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	parent.End()
	spans := rec.Ended()
	if len(spans) != 3 || len(seen) != 2 {
		t.Fatalf("%d spans, %d attempts; want 2 attempt spans and the caller's", len(spans), len(seen))
	}
	for i, sp := range spans[:2] {
		if sp.Parent().SpanID() != parent.SpanContext().SpanID() || sp.SpanContext().SpanID() != seen[i] {
			t.Errorf("attempt %d: span %v under %v, base saw %v", i+1, sp.SpanContext().SpanID(), sp.Parent().SpanID(), seen[i])
		}
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
