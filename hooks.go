package rebound

// Hooks is an Observer made of one optional function per kind of event of
// a retry loop, like net/http's HandlerFunc: WithObserver(Hooks{GaveUp: f})
// calls f for each EventGiveUp and ignores the other kinds. A nil field
// skips its kind.
type Hooks struct {
	// Attempted: an attempt ended (EventAttempt); Err is its outcome,
	// nil for a success.
	Attempted func(Event)
	// Retried: an attempt failed with a transient error and the loop
	// waits Delay (EventRetry).
	Retried func(Event)
	// Recovered: an attempt succeeded after at least one failure
	// (EventRecovered).
	Recovered func(Event)
	// GaveUp: the loop ended with the error Err (EventGiveUp).
	GaveUp func(Event)
	// Throttled: an attempt was refused locally and not sent
	// (EventThrottled): by the AdaptiveThrottle, the RetryBudget or the
	// Breaker, under every refusal rule (WithRefusal); Err is the refusal
	// (ErrThrottled, ErrBudgetExhausted, a *BreakerError), Delay the wait
	// before the loop tries again (0 if it gives up or drops the work).
	Throttled func(Event)
}

// Observe calls the field for e.Kind, if set.
func (h Hooks) Observe(e Event) { h.observe(&e) }

func (h *Hooks) observe(e *Event) {
	var f func(Event)
	switch e.Kind {
	case EventAttempt:
		f = h.Attempted
	case EventRetry:
		f = h.Retried
	case EventRecovered:
		f = h.Recovered
	case EventGiveUp:
		f = h.GaveUp
	case EventThrottled:
		f = h.Throttled
	}
	if f != nil {
		f(*e)
	}
}

func (h Hooks) isZero() bool {
	return h.Attempted == nil && h.Retried == nil && h.Recovered == nil && h.GaveUp == nil && h.Throttled == nil
}

// The emitters allocate nothing: an Event is passed by value, and the
// meter (WithMeterProvider) is called first, directly.

func (c *config) observed() bool { return len(c.observers) > 0 || c.meter != nil }

// observerSlot is one WithObserver observer: a Hooks is kept as such and
// called directly, without an interface call that copies the Event.
type observerSlot struct {
	hooks *Hooks
	o     Observer
}

func (c *config) emit(e Event) {
	if c.meter != nil {
		c.meter.Observe(e)
	}
	for i := range c.observers {
		if h := c.observers[i].hooks; h != nil {
			h.observe(&e)
		} else {
			c.observers[i].o.Observe(e)
		}
	}
}

func (c *config) emitAttempted(e Event) {
	e.Kind = EventAttempt
	c.emit(e)
}

func (c *config) emitRetried(e Event) {
	e.Kind = EventRetry
	c.emit(e)
}

func (c *config) emitRecovered(e Event) {
	e.Kind = EventRecovered
	c.emit(e)
}

func (c *config) emitThrottled(e Event) {
	e.Kind = EventThrottled
	c.emit(e)
}

func (c *config) emitGaveUp(e Event) {
	e.Kind = EventGiveUp
	c.emit(e)
}
