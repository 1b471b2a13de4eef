package subscriber_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/subscribertest"
)

// A zero RetryBudget or AdaptiveThrottle used to be accepted by New and to
// panic (integer divide by zero) on the scheduler goroutine at the first
// retry; now New names the option.
func TestZeroBudgetAndThrottleRejected(t *testing.T) {
	reg := subscribertest.New()
	defer reg.Close()
	for _, tc := range []struct {
		opt  subscriber.Option
		want string
	}{
		{subscriber.WithBudget(&rebound.RetryBudget{}), "subscriber.WithBudget: b is a zero RetryBudget"},
		{subscriber.WithThrottle(&rebound.AdaptiveThrottle{}), "subscriber.WithThrottle: t is a zero AdaptiveThrottle"},
	} {
		m, err := subscriber.New(reg, tc.opt)
		if m != nil {
			m.Close()
		}
		if !errors.Is(err, rebound.ErrInvalidArgument) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New = %v, want an *ArgumentError containing %q", err, tc.want)
		}
	}
	b, _ := rebound.NewRetryBudget(0.2, 10, 10*time.Second)
	th, _ := rebound.NewAdaptiveThrottle(2, 2*time.Minute, nil)
	m, err := subscriber.New(reg, subscriber.WithBudget(b), subscriber.WithThrottle(th))
	if err != nil {
		t.Fatal(err)
	}
	m.Close()
}

// A nil *Registry in the interface used to panic inside New.
func TestNewNilPointerRegistry(t *testing.T) {
	var reg *subscribertest.Registry
	m, err := subscriber.New(reg)
	if m != nil {
		m.Close()
	}
	if !errors.Is(err, rebound.ErrInvalidArgument) || !strings.Contains(err.Error(), "subscriber.New: reg is a nil pointer") {
		t.Fatalf("New = %v, want an *ArgumentError naming reg", err)
	}
}
