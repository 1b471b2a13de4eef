package rebound_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sony/gobreaker/v2"

	"github.com/rebound-go/rebound"
)

// fakeBreaker admits while open is false and records what done receives.
type fakeBreaker struct {
	mu     sync.Mutex
	open   bool
	asked  int
	result []error
}

func (b *fakeBreaker) Allow() (func(error), error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.asked++
	if b.open {
		return nil, gobreaker.ErrOpenState
	}
	return func(err error) {
		b.mu.Lock()
		b.result = append(b.result, err)
		b.mu.Unlock()
	}, nil
}

func TestWithBreakerBadInput(t *testing.T) {
	var nilPtr *gobreaker.TwoStepCircuitBreaker[any]
	for _, c := range []struct {
		name string
		b    rebound.Breaker
		want string
	}{
		{"nil", nil, "rebound.WithBreaker: b must not be nil"},
		{"nil pointer", nilPtr, "rebound.WithBreaker: b is a nil pointer"},
	} {
		_, err := rebound.NewRetrier(rebound.Policy{}, rebound.WithBreaker(c.b))
		if _, ok := errors.AsType[*rebound.ArgumentError](err); !ok || !errors.Is(err, rebound.ErrInvalidArgument) ||
			!strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want a *rebound.ArgumentError saying %q", c.name, err, c.want)
		}
	}
}

// gobreaker's TwoStepCircuitBreaker is a Breaker as it is. Once it opens,
// attempts are not sent: each refusal is a failed attempt that was not
// made (Hooks.Throttled, ErrBreakerOpen), the loop backs off and asks
// again, and ends when the policy runs out.
func TestRetrierBreakerRefusalIsLikeThrottle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cb := gobreaker.NewTwoStepCircuitBreaker[any](gobreaker.Settings{
			ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= 2 },
			Timeout:     time.Hour,
		})
		var mu sync.Mutex
		var refused []error
		r, err := rebound.NewRetrier(rebound.Policy{Initial: 10 * time.Millisecond},
			rebound.WithBreaker(cb),
			rebound.WithObserver(rebound.Hooks{Throttled: func(e rebound.Event) { mu.Lock(); refused = append(refused, e.Err); mu.Unlock() }}), rebound.WithMaxAttempts(5))
		if err != nil {
			t.Fatal(err)
		}
		calls := 0
		down := rebound.Transient(errors.New("unavailable"))
		err = r.Do(context.Background(), func(context.Context) error { calls++; return down })
		if calls != 2 {
			t.Errorf("op called %d times, want 2 (then the breaker is open)", calls)
		}
		var re *rebound.RetryError
		if !errors.As(err, &re) || !errors.Is(re.Reason, rebound.ErrExhausted) || !errors.Is(re.Last, rebound.ErrBreakerOpen) ||
			!errors.Is(re.Last, gobreaker.ErrOpenState) || re.Attempts != 5 {
			t.Errorf("Do: %v (%+v), want ErrExhausted after 5 attempts, Last a refusal by the breaker", err, re)
		}
		if len(refused) != 3 || !errors.Is(refused[0], rebound.ErrBreakerOpen) {
			t.Errorf("Throttled hooks %v, want 3 breaker refusals", refused)
		}
		// A first attempt refused at once goes through the same rule.
		calls = 0
		err = r.Do(context.Background(), func(context.Context) error { calls++; return nil })
		if calls != 0 || !errors.Is(err, rebound.ErrBreakerOpen) {
			t.Errorf("open breaker: op called %d times, Do %v; want 0 and a refusal", calls, err)
		}
	})
}

// Every admitted attempt's outcome reaches done, the success included;
// a half-open breaker gets its probe and closes.
func TestRetrierBreakerOutcomes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &fakeBreaker{}
		r, _ := rebound.NewRetrier(rebound.Policy{Initial: 10 * time.Millisecond}, rebound.WithBreaker(b), rebound.WithMaxAttempts(4))
		boom := rebound.Transient(errors.New("boom"))
		n := 0
		err := r.Do(context.Background(), func(context.Context) error {
			n++
			if n < 3 {
				return boom
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(b.result) != 3 || b.result[0] != boom || b.result[1] != boom || b.result[2] != nil || b.asked != 3 {
			t.Errorf("breaker asked %d times, told %v; want 3 and [boom boom nil]", b.asked, b.result)
		}
	})
}

// A Schedule asks the breaker in Admit (the heap-scheduler form) and
// reports its refusal through Throttled, counting it as an attempt.
func TestScheduleAdmitAsksBreaker(t *testing.T) {
	b := &fakeBreaker{open: true}
	// The first attempt was made outside the Schedule: it asks no gate.
	r, _ := rebound.NewRetrier(rebound.Policy{Initial: time.Second}, rebound.WithBreaker(b),
		rebound.WithAdmission(rebound.FirstAttempt, 0), rebound.WithMaxAttempts(10))
	now := time.Unix(0, 0)
	s := newLoop(r, now)
	if d, err := s.next(errors.New("x"), now); err != nil || d <= 0 {
		t.Fatalf("Next: %v, %v", d, err)
	}
	d, err := s.admit(now.Add(time.Second))
	if err != nil || !s.throttled() || d <= 0 || s.Attempts() != 2 {
		t.Fatalf("Admit with the breaker open: %v, %v, Throttled %v, Attempts %d; want a backoff, Throttled, 2 attempts",
			d, err, s.throttled(), s.Attempts())
	}
	b.open = false
	if d, err := s.admit(now.Add(3 * time.Second)); err != nil || s.throttled() || d != 0 {
		t.Fatalf("Admit with the breaker closed: %v, %v, Throttled %v", d, err, s.throttled())
	}
	s.succeeded(now.Add(3 * time.Second))
	if len(b.result) != 1 || b.result[0] != nil {
		t.Errorf("done got %v, want [nil]", b.result)
	}
	// Admitted, then the loop restarts: the breaker hears context.Canceled.
	r2, _ := rebound.NewRetrier(rebound.Policy{Initial: time.Second}, rebound.WithBreaker(b), rebound.WithMaxAttempts(10))
	s2 := newLoop(r2, now.Add(4*time.Second))
	_, _ = s2.begin(now.Add(4 * time.Second))
	s2.Reset(now.Add(4 * time.Second))
	if len(b.result) != 2 || !errors.Is(b.result[1], context.Canceled) {
		t.Errorf("done got %v, want [nil context.Canceled]", b.result)
	}
}

// BenchmarkRetrierDoBreaker is Do's success path without and with a
// gobreaker TwoStepCircuitBreaker, in the same run.
func BenchmarkRetrierDoBreaker(b *testing.B) {
	ctx := context.Background()
	op := func(context.Context) error { return nil }
	b.Run("baseline", func(b *testing.B) {
		r, _ := rebound.NewRetrier(rebound.Policy{})
		b.ReportAllocs()
		for b.Loop() {
			_ = r.Do(ctx, op)
		}
	})
	b.Run("gobreaker", func(b *testing.B) {
		r, _ := rebound.NewRetrier(rebound.Policy{}, rebound.WithBreaker(gobreaker.NewTwoStepCircuitBreaker[any](gobreaker.Settings{})))
		b.ReportAllocs()
		for b.Loop() {
			_ = r.Do(ctx, op)
		}
	})
}
