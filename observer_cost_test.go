package rebound_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/internal/telemetry/telemetrytest"
)

// Retry whose options are only observers and a meter compiles nothing
// when its first attempt succeeds: no allocation, and each observer (the
// meter first) hears the one EventAttempt a Retrier would report. Before
// issue 26 Retry compiled its options on every call (2 allocs with one
// observer, 1 with WithMeterProvider).
func TestRetryObservedSuccessDoesNotAllocate(t *testing.T) {
	ctx := context.Background()
	op := func(context.Context) error { return nil }
	reader := sdkmetric.NewManualReader()
	meter := rebound.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))
	type heard struct {
		name    string
		kind    rebound.EventKind
		attempt int
	}
	got := make([]heard, 0, 1000) // appends within capacity: the observers allocate nothing
	rec := func(name string) rebound.ObserverFunc {
		return func(e rebound.Event) { got = append(got, heard{name, e.Kind, e.Attempt}) }
	}
	cases := []struct {
		name string
		opts []rebound.Option
		want []string
	}{
		{"observer", []rebound.Option{rebound.WithObserver(rec("f"))}, []string{"f attempt 1"}},
		{"meter", []rebound.Option{meter}, nil},
		{"hooks+observer+meter+nil", []rebound.Option{rebound.WithObserver(rebound.Hooks{Attempted: rec("h"), GaveUp: rec("x")}),
			nil, meter, rebound.WithObserver(rec("f"))}, []string{"h attempt 1", "f attempt 1"}},
	}
	for _, tc := range cases {
		got = got[:0]
		if err := rebound.Retry(ctx, rebound.Policy{}, op, tc.opts...); err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, h := range got {
			names = append(names, fmt.Sprintf("%s %v %d", h.name, h.kind, h.attempt))
		}
		if fmt.Sprint(names) != fmt.Sprint(tc.want) {
			t.Errorf("%s: events %q, want %q", tc.name, names, tc.want)
		}
		got = got[:0]
		if a := testing.AllocsPerRun(100, func() { _ = rebound.Retry(ctx, rebound.Policy{}, op, tc.opts...) }); a != 0 {
			t.Errorf("Retry with %s, first attempt succeeds: %v allocs, want 0", tc.name, a)
		}
	}
	// 1 + 101 calls with the meter in each of two cases.
	if n := telemetrytest.Collect(t, reader)["rebound.retry.attempts"]["outcome=success"]; n != 2*102 {
		t.Errorf("rebound.retry.attempts{outcome=success} = %d, want %d", n, 2*102)
	}
}

// Retry with observers only still reports a failed first attempt and the
// retries after it, in order, as a Retrier does: the options are compiled
// when the first attempt fails.
func TestRetryObservedFailureReportsEveryEvent(t *testing.T) {
	errBusy := errors.New("busy")
	var got []string
	rec := rebound.ObserverFunc(func(e rebound.Event) { got = append(got, fmt.Sprintf("%v %d", e.Kind, e.Attempt)) })
	p := rebound.Policy{Initial: rebound.MinDelay, Max: rebound.MinDelay}
	calls := 0
	err := rebound.Retry(context.Background(), p, func(context.Context) error {
		if calls++; calls < 3 {
			return errBusy
		}
		return nil
	}, rebound.WithObserver(rec), rebound.WithMaxAttempts(3))
	if err != nil {
		t.Fatal(err)
	}
	want := "[attempt 1 retry 1 attempt 2 retry 2 attempt 3 recovered 3]"
	if fmt.Sprint(got) != want {
		t.Fatalf("events %v, want %v", got, want)
	}
}
