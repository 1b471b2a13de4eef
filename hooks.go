package rebound

import "time"

// EventKind says what happened in a retry loop.
type EventKind int

const (
	// EventRetry: an attempt failed with a transient error and the loop
	// will wait Delay before the next one (Hooks.Retried).
	EventRetry EventKind = iota + 1
	// EventSuccess: an attempt succeeded (Attempt may be 1); only
	// WithNotify reports it, from Hooks.Attempted.
	EventSuccess
	// EventGiveUp: the loop ended with an error (Err is what the loop
	// returns) (Hooks.GaveUp).
	EventGiveUp
	// EventAttempt: an attempt ended, with Err its outcome (nil: success)
	// (Hooks.Attempted).
	EventAttempt
	// EventRecovered: an attempt succeeded after at least one failure
	// (Hooks.Recovered).
	EventRecovered
	// EventThrottled: an attempt was refused locally (the
	// AdaptiveThrottle, the RetryBudget or the Breaker; see WithRefusal):
	// it was not sent, Err is the refusal (ErrThrottled,
	// ErrBudgetExhausted, a *BreakerError), and the loop waits Delay
	// before trying again (Delay 0: the loop gives up, GaveUp follows, or
	// the work is dropped) (Hooks.Throttled).
	EventThrottled
)

func (k EventKind) String() string {
	switch k {
	case EventRetry:
		return "retry"
	case EventSuccess:
		return "success"
	case EventGiveUp:
		return "give-up"
	case EventAttempt:
		return "attempt"
	case EventRecovered:
		return "recovered"
	case EventThrottled:
		return "throttled"
	}
	return "unknown"
}

// Event describes one step of a retry loop. It is passed by value: hooks
// cost no allocation.
type Event struct {
	Kind EventKind
	// Attempt is the number of attempts made so far (1 for the first).
	Attempt int
	// Err is the attempt's error (EventAttempt: nil for a success;
	// EventRetry; ErrThrottled for EventThrottled), or the error the loop
	// returns (EventGiveUp); nil for EventSuccess and EventRecovered.
	Err error
	// Delay is the wait before the next attempt, Retry-After included,
	// limiter wait not included (EventRetry, and EventThrottled: 0 when
	// the loop gives up).
	Delay time.Duration
	// LimiterWait is the time the attempt waited for a limiter token after
	// its Delay (EventAttempt, EventSuccess, EventRecovered; 0 without
	// WithLimiter, and for a first attempt that is not behind the limiter:
	// see WithAdmission).
	LimiterWait time.Duration
	// Waiting is set on an EventGiveUp that does not end an attempt: the
	// loop stopped while waiting for its next attempt (its context done, a
	// deadline, a limiter token past MaxElapsed; that attempt's failure
	// was already reported with EventRetry), or on an attempt the throttle
	// rejected locally (reported with EventThrottled, never sent).
	// Counters of attempts skip these.
	Waiting bool
	// Elapsed is the time since the loop started: since the start of its
	// first attempt when the policy has a MaxElapsed (which needs it),
	// otherwise since that attempt failed, so that the success path never
	// reads the clock (time.Now costs more than the rest of it). It is 0
	// for the first attempt's own event.
	Elapsed time.Duration
}

// Hooks observe a retry loop (Retry, Retrier.Do, and, for what a Schedule
// decides, loops built on Schedule that call them themselves). Every field
// is optional. Hooks are called synchronously from the goroutine running
// the loop, never under a lock of rebound's, in this order for one attempt:
// Attempted, then Retried or Recovered or GaveUp; an attempt the
// AdaptiveThrottle rejects locally is never made, so it is reported by
// Throttled alone (then GaveUp if the loop stops). A slow hook slows only
// its own loop. They are the one hooks shape of rebound (failback.Hooks and
// subscriber's follow it): a struct of funcs taking a value.
//
// For metrics of your own (WithMeterProvider records rebound's without a
// hook): Attempted gives every attempt and its outcome (Err nil,
// transient, or final), and the limiter wait before it; Retried gives
// each backoff delay; Throttled each attempt rejected locally (not sent);
// Recovered and GaveUp end an episode.
type Hooks struct {
	// Attempted is called after every attempt, Kind EventAttempt, Err the
	// attempt's outcome (nil: it succeeded).
	Attempted func(Event)
	// Retried is called when an attempt failed with a transient error and
	// the loop will wait Delay; Kind EventRetry.
	Retried func(Event)
	// Recovered is called when an attempt succeeded after at least one
	// failure; Kind EventRecovered.
	Recovered func(Event)
	// GaveUp is called when the loop ends with an error; Kind EventGiveUp,
	// Err the error the loop returns; Waiting when no attempt ended there
	// (see Event.Waiting).
	GaveUp func(Event)
	// Throttled is called when an attempt was refused locally (it was
	// not sent): by the AdaptiveThrottle, the RetryBudget or the Breaker,
	// under every refusal rule; Kind EventThrottled, Err the refusal
	// (ErrThrottled, ErrBudgetExhausted, a *BreakerError), Delay the wait
	// before the loop tries again (0 if it gives up: GaveUp follows).
	// Attempted is not called for it.
	Throttled func(Event)
}

func (h Hooks) isZero() bool {
	return h.Attempted == nil && h.Retried == nil && h.Recovered == nil && h.GaveUp == nil && h.Throttled == nil
}

// The emitters allocate nothing; WithNotify's functions are called after
// the Hooks of the same event.

func (c *config) observed() bool { return len(c.hooks) > 0 || len(c.notify) > 0 || c.meter != nil }

func (c *config) emitAttempted(e Event) {
	c.meter.Attempted(e.Err, e.LimiterWait) // nil-safe
	e.Kind = EventAttempt
	for i := range c.hooks {
		if f := c.hooks[i].Attempted; f != nil {
			f(e)
		}
	}
	if e.Err == nil && len(c.notify) > 0 {
		e.Kind = EventSuccess
		for _, f := range c.notify {
			f(e)
		}
	}
}

func (c *config) emitRetried(e Event) {
	c.meter.Retried(e.Delay)
	e.Kind = EventRetry
	for i := range c.hooks {
		if f := c.hooks[i].Retried; f != nil {
			f(e)
		}
	}
	for _, f := range c.notify {
		f(e)
	}
}

func (c *config) emitRecovered(e Event) {
	e.Kind = EventRecovered
	for i := range c.hooks {
		if f := c.hooks[i].Recovered; f != nil {
			f(e)
		}
	}
}

// emitThrottled reports an attempt rejected locally. WithNotify's
// functions do not see it (they get retry, success and give-up events).
func (c *config) emitThrottled(e Event) {
	c.meter.Throttled()
	e.Kind = EventThrottled
	for i := range c.hooks {
		if f := c.hooks[i].Throttled; f != nil {
			f(e)
		}
	}
}

func (c *config) emitGaveUp(e Event) {
	if !e.Waiting {
		c.meter.GaveUp() // one failed attempt that ended the loop
	}
	e.Kind = EventGiveUp
	for i := range c.hooks {
		if f := c.hooks[i].GaveUp; f != nil {
			f(e)
		}
	}
	for _, f := range c.notify {
		f(e)
	}
}
