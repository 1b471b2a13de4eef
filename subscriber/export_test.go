package subscriber

import (
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/rebound-go/rebound"
)

// Unexported constants the external tests bound their waits with.
const (
	MaxTimerSlack      = maxTimerSlack
	MinReconcilePeriod = minReconcilePeriod
)

// The tests' views of a SubscriptionEvent, one per kind (Hooks' arguments),
// with the rebound.Event's Attempt, Err and Delay.
type (
	StateChange struct {
		Key      Key
		ID       uint64
		From, To State
		Reason   error
		At       time.Time
	}
	Delivery struct {
		Key       Key
		ID        uint64
		Result    string
		Instances int
		At        time.Time
	}
	Confirmation struct {
		Key    Key
		ID     uint64
		Reason string
		At     time.Time
	}
	Deferral struct {
		Key    Key
		ID     uint64
		Reason error
		Delay  time.Duration
		At     time.Time
	}
	SubscribeAttempt struct {
		Key     Key
		ID      uint64
		Attempt int
		Err     error
		Delay   time.Duration
		At      time.Time
	}
)

// Hooks adapts functions to a rebound.Observer of a Manager's events, for
// the tests; nil fields are skipped. A subscription's events carry a
// SubscriptionEvent; EventConnection a ConnectionChange.
type Hooks struct {
	// StateChanged: a subscription moved from one State to another
	// (including pending at its creation, From 0, and stopped at its end,
	// with the reason).
	StateChanged func(StateChange)
	// Delivered: the adapter handed over a list and the Manager decided
	// what to do with it (Delivery.Result).
	Delivered func(Delivery)
	// Confirmed: the adapter reported evidence that the registry holds a
	// subscription (Sink.Confirmed), or a Registry.Subscribe call was
	// acknowledged (Reason "subscribe").
	Confirmed func(Confirmation)
	// Connection: the ConnectionMonitor reported a connection change.
	Connection func(ConnectionChange)
	// Deferred: an attempt that was due was not sent, deferred locally by
	// the throttle (WithThrottle) or the retry budget (WithBudget).
	Deferred func(Deferral)
	// Attempted: a Registry.Subscribe call of a subscription ended (Err
	// its error, nil if acknowledged); the kinds that follow a failure
	// (rebound.EventRetry, EventGiveUp) reach only a raw Observer.
	Attempted func(SubscribeAttempt)
}

// Observe calls the field for e's kind, if set.
func (h Hooks) Observe(e rebound.Event) {
	if c, ok := e.Detail.(ConnectionChange); ok {
		if h.Connection != nil {
			h.Connection(c)
		}
		return
	}
	d, ok := e.Detail.(SubscriptionEvent)
	if !ok {
		return
	}
	switch e.Kind {
	case rebound.EventStateChanged:
		if h.StateChanged != nil {
			h.StateChanged(StateChange{Key: d.Key, ID: d.ID, From: d.From, To: d.To, Reason: e.Err, At: d.At})
		}
	case rebound.EventDelivered:
		if h.Delivered != nil {
			h.Delivered(Delivery{Key: d.Key, ID: d.ID, Result: d.Result, Instances: d.Instances, At: d.At})
		}
	case rebound.EventConfirmed:
		if h.Confirmed != nil {
			h.Confirmed(Confirmation{Key: d.Key, ID: d.ID, Reason: d.Reason, At: d.At})
		}
	case rebound.EventThrottled:
		if h.Deferred != nil {
			h.Deferred(Deferral{Key: d.Key, ID: d.ID, Reason: e.Err, Delay: e.Delay, At: d.At})
		}
	case rebound.EventAttempt:
		if h.Attempted != nil {
			h.Attempted(SubscribeAttempt{Key: d.Key, ID: d.ID, Attempt: e.Attempt, Err: e.Err, Delay: e.Delay, At: d.At})
		}
	}
}

func (h Hooks) empty() bool { // WithPolicy ignores an empty Hooks
	return h.StateChanged == nil && h.Delivered == nil && h.Confirmed == nil && h.Connection == nil && h.Deferred == nil &&
		h.Attempted == nil
}

// Counts are the Manager's figures for the tests, with the connection as
// "connected", "disconnected" or "" (no report yet).
type Counts struct {
	counts
	Connection string
}

// Counts returns m's figures without locking any subscription.
func (m *Manager) Counts() Counts {
	c := Counts{counts: m.counts()}
	if up, ok := m.Connected(); ok {
		c.Connection = "disconnected"
		if up {
			c.Connection = "connected"
		}
	}
	return c
}

// Key returns the subscription's key.
func (s *Subscription) Key() Key { return s.keyCopy() }

// Refresh is refresh.
func (s *Subscription) Refresh() { s.refresh() }

// Key returns the view's key.
func (v *View) Key() Key { return v.w.sub.keyCopy() }

// defaultGroups holds the group of each Manager's Watch.
var defaultGroups sync.Map // *Manager -> *WatchGroup

// Watch is a View of key from a group of m's own (linger 0, default pace).
func (m *Manager) Watch(key Key) (*View, error) {
	g, ok := defaultGroups.Load(m)
	if !ok {
		ng, err := m.NewWatchGroup(0, 0)
		if err != nil {
			return nil, err
		}
		g, _ = defaultGroups.LoadOrStore(m, ng)
	}
	return g.(*WatchGroup).Watch(key)
}

// The options below moved out of the API: WithPolicy's rebound options
// replace the first three; the refresh interval is fixed.

// WithLimiter sets the limiter shared by the Manager's retries and
// reconnect confirmations (a subscription's first attempt takes no token).
// Default: 1,000 per second, bursts of 100; nil: no limit. A finite rate
// needs a burst of at least 1.
func WithLimiter(l *rate.Limiter) Option {
	return managerOpt(func(o *options) {
		if l != nil && l.Limit() != rate.Inf && l.Burst() < 1 {
			o.errs = append(o.errs, argError("subscriber.WithLimiter", "l", "has a burst below 1 and a finite rate: it would never grant a token"))
			return
		}
		o.limiter, o.limiterSet = l, true
	})
}

// WithRefreshInterval sets the shortest time between two
// re-confirmations started by Subscription.Refresh. Default: 5 s; d must
// be positive.
func WithRefreshInterval(d time.Duration) Option {
	return managerOpt(func(o *options) {
		if d <= 0 {
			o.errs = append(o.errs, argError("subscriber.WithRefreshInterval", "d", "must be positive"))
			return
		}
		o.refreshMin = d
	})
}

// WithBudget bounds the subscriptions' retries with b, which may be
// shared. A refused retry waits the next backoff step (Status.Deferred,
// Deferral events); a subscription never gives up on it. A nil b is
// ignored; a zero RetryBudget makes New fail.
func WithBudget(b *rebound.RetryBudget) Option {
	return managerOpt(func(o *options) {
		if b == nil {
			return
		}
		// A zero RetryBudget (not made by NewRetryBudget) would panic in the
		// scheduler at its first withdrawal; rebound.WithBudget knows the rule.
		if _, err := rebound.NewRetrier(rebound.Policy{}, rebound.WithBudget(b)); err != nil {
			o.errs = append(o.errs, argError("subscriber.WithBudget", "b",
				"is a zero RetryBudget, which is not usable: make it with rebound.NewRetryBudget"))
			return
		}
		o.budget = b
	})
}

// WithThrottle makes the subscriptions' retries ask t, which may be
// shared; an acknowledged Subscribe is an accept. First attempts are
// never throttled. A rejected retry waits the next backoff step. A nil t
// is ignored; a zero AdaptiveThrottle makes New fail.
func WithThrottle(t *rebound.AdaptiveThrottle) Option {
	return managerOpt(func(o *options) {
		if t == nil {
			return
		}
		if _, err := rebound.NewRetrier(rebound.Policy{}, rebound.WithThrottle(t)); err != nil {
			o.errs = append(o.errs, argError("subscriber.WithThrottle", "t",
				"is a zero AdaptiveThrottle, which is not usable: make it with rebound.NewAdaptiveThrottle"))
			return
		}
		o.throttle = t
	})
}

// The closed sentinels of the Manager and of Unsubscribe (both match
// rebound.ErrClosed), for the tests that tell them apart.
var (
	ErrManagerClosed = errManagerClosed
	ErrUnsubscribed  = errUnsubscribed
)

// ErrDisconnected is a subscription's last error after a reported loss.
var ErrDisconnected = errDisconnected

// Observed reports whether m has observers (the metrics count).
func Observed(m *Manager) bool { return m.observed() }
