package subscriber

import (
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"
	"golang.org/x/time/rate"

	"github.com/rebound-go/rebound"
)

// Defaults of a Manager.
const (
	// DefaultLimit and DefaultBurst size the default shared limiter: every
	// retry, and every confirmation after a reconnect, takes a token, so a
	// recovering registry sees at most DefaultBurst requests at once and
	// DefaultLimit per second from one Manager (1,000 subscriptions are
	// confirmed again in about 1 s, at most about 200 requests in any
	// 100 ms, where a fixed-interval loop sends all 1,000 at once).
	DefaultLimit rate.Limit = 1000
	DefaultBurst int        = 100

	// DefaultEmptyListHold is how long an empty list reported after a
	// reconnect is held back (see WithEmptyListHold).
	DefaultEmptyListHold = 30 * time.Second

	// DefaultConfirmTimeout is the Manager's safety cap on a
	// ReconnectConfirmer: a subscription the adapter neither confirms nor
	// hands back within it after a Connected report is confirmed by the
	// Manager itself (see WithConfirmTimeout).
	DefaultConfirmTimeout = 15 * time.Second

	// DefaultRefreshInterval is the shortest time between two
	// re-confirmations of one subscription asked for by
	// Subscription.Refresh (see WithRefreshInterval).
	DefaultRefreshInterval = 5 * time.Second

	// DefaultStoppedRetention is how many stopped subscriptions Status
	// keeps (see WithStoppedRetention).
	DefaultStoppedRetention = 100

	// MinReconcilePeriod is the shortest period WithReconcile accepts.
	MinReconcilePeriod = time.Second

	// UnsubscribeTimeout bounds each Registry.Unsubscribe call the Manager
	// makes when a subscription stops.
	UnsubscribeTimeout = 10 * time.Second
)

// An Option configures a Manager (see New).
type Option interface {
	apply(*options)
}

type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

type options struct {
	policy      rebound.Policy
	log         *zap.Logger
	limiter     *rate.Limiter
	limiterSet  bool
	hold        time.Duration
	confirmCap  time.Duration
	refreshMin  time.Duration
	reconcile   time.Duration
	observers   []rebound.Observer
	keepStopped int
	budget      *rebound.RetryBudget      // WithBudget
	throttle    *rebound.AdaptiveThrottle // WithThrottle
	// meterProvider: WithMeterProvider (metrics.go)
	meterProvider metric.MeterProvider
	errs          []error
}

// WithPolicy sets the backoff of every subscription's retry loop. The
// default is the zero rebound.Policy: full jitter, first ceiling 1 s,
// doubling, capped at 30 s, unlimited attempts. p must be valid
// (rebound.Policy.Validate) and must leave MaxAttempts and MaxElapsed zero:
// a subscription never gives up on a transient error, so New rejects a
// policy that would make it.
func WithPolicy(p rebound.Policy) Option {
	return optionFunc(func(o *options) {
		if err := p.Validate(); err != nil {
			o.errs = append(o.errs, &ArgumentError{Func: "subscriber.WithPolicy", Arg: "p", Reason: "is invalid", Err: err})
			return
		}
		if p.MaxAttempts != 0 {
			o.errs = append(o.errs, argError("subscriber.WithPolicy", "p.MaxAttempts", "must be 0: a subscription retries until it is stopped"))
		}
		if p.MaxElapsed != 0 {
			o.errs = append(o.errs, argError("subscriber.WithPolicy", "p.MaxElapsed", "must be 0: a subscription retries until it is stopped"))
		}
		o.policy = p
	})
}

// WithLogger sets the logger. Default: none (zap.NewNop). Each subscription
// logs through a throttled logging.Loop (a handful of lines per outage,
// each attempt at Debug) with the fields component="subscriber" and
// key=Key.String(). Credentials are scrubbed (logging.Redacted). The
// global zap logger is never used.
func WithLogger(l *zap.Logger) Option {
	return optionFunc(func(o *options) { o.log = l })
}

// WithLimiter sets the limiter shared by all the Manager's subscriptions:
// every retry, and the first attempt of every confirmation after a
// reconnect or Sink.Resubscribe, waits for a token (a subscription's very
// first attempt does not). Default: rate.NewLimiter(DefaultLimit,
// DefaultBurst). nil disables the limit. A limiter may be shared with other
// Managers or loops. A limiter with a finite rate must have a burst of at
// least 1 (with burst 0 it would never grant a token).
func WithLimiter(l *rate.Limiter) Option {
	return optionFunc(func(o *options) {
		if l != nil && l.Limit() != rate.Inf && l.Burst() < 1 {
			o.errs = append(o.errs, argError("subscriber.WithLimiter", "l", "has a burst below 1 and a finite rate: it would never grant a token"))
			return
		}
		o.limiter, o.limiterSet = l, true
	})
}

// WithEmptyListHold sets how long an empty instance list is held back
// after a registry disconnection or restart, so that listeners keep the
// last known good list while the providers re-register. Default:
// DefaultEmptyListHold (30 s); 0 delivers empty lists at once; d must not
// be negative.
//
// The hold window opens when the ConnectionMonitor reports the connection
// lost or re-established, and closes d after the subscription is confirmed
// again. An empty list that arrives in it, after a non-empty one or as a
// first list, is held: a non-empty list arriving meanwhile replaces it;
// otherwise it is delivered when the window closes, and never later than d
// after it arrived. Outside a window an empty list is delivered at once.
// With a Registry that implements Reconciler, a held list is checked
// against the server (at most three Lookups), and the server's instances
// end the hold. Status shows HeldSince, HeldUntil and HeldReason. The
// rules in full, and what the hold costs a service that really became
// empty, are in docs/guide.md and docs/skeptic.md.
func WithEmptyListHold(d time.Duration) Option {
	return optionFunc(func(o *options) {
		if d < 0 {
			o.errs = append(o.errs, argError("subscriber.WithEmptyListHold", "d", "must not be negative (0 disables the hold)"))
			return
		}
		o.hold = d
	})
}

// WithConfirmTimeout sets the Manager's safety cap on a Registry that
// implements ReconnectConfirmer: after a Connected report, a subscription
// that the adapter has neither confirmed (Sink.Confirmed) nor handed back
// (Sink.Resubscribe) within d is confirmed by the Manager itself, through
// its paced loop, with the reason ErrNotConfirmed. It has no effect on
// other registries. Default: DefaultConfirmTimeout (15 s). d must be
// positive.
func WithConfirmTimeout(d time.Duration) Option {
	return optionFunc(func(o *options) {
		if d <= 0 {
			o.errs = append(o.errs, argError("subscriber.WithConfirmTimeout", "d", "must be positive"))
			return
		}
		o.confirmCap = d
	})
}

// WithRefreshInterval sets the shortest time between two
// re-confirmations of one subscription started by Subscription.Refresh:
// calls within d of the last one started, or while one is pending or in
// flight, do nothing. Default: DefaultRefreshInterval (5 s). d must be
// positive.
func WithRefreshInterval(d time.Duration) Option {
	return optionFunc(func(o *options) {
		if d <= 0 {
			o.errs = append(o.errs, argError("subscriber.WithRefreshInterval", "d", "must be positive"))
			return
		}
		o.refreshMin = d
	})
}

// WithReconcile turns on periodic reconciliation, for registries that
// implement Reconciler: every subscribed subscription reads its list from
// the server (Reconciler.Lookup) about once per period (jittered uniformly
// in [0.75, 1.25] x period, each read taking a token of the shared
// limiter) and compares it with the last list the adapter handed over; on
// a difference it delivers the server's list and resubscribes (Status
// LastErr ErrOutOfSync). It catches silent loss without a connection
// change: a server that forgot the subscriber, a lost push.
//
// Cost: 3600/period-in-seconds reads per subscription per hour: 12 at
// 5 minutes, 60 at 1 minute (1,000 subscriptions at 5 minutes: 12,000
// reads an hour, 3.3 per second). Default: 0, off. period must be 0 or at
// least MinReconcilePeriod (1 s); a period of centuries is allowed and
// means about never (the jittered delay saturates, it never overflows).
// Registries without Reconciler ignore it.
func WithReconcile(period time.Duration) Option {
	return optionFunc(func(o *options) {
		if period != 0 && period < MinReconcilePeriod {
			o.errs = append(o.errs, argError("subscriber.WithReconcile", "period", "must be 0 (off) or at least 1s"))
			return
		}
		o.reconcile = period
	})
}

// WithObserver adds o as an observer of the Manager's events (see Hooks
// for the kinds, the goroutines that call it and what a slow observer
// stalls): a Hooks value, a rebound.ObserverFunc, a rebound.Queue. Several
// add up, called in the order given, after the metrics of
// WithMeterProvider. A nil o is ignored. Default: none.
func WithObserver(o rebound.Observer) Option {
	if rebound.IsNilObserver(o) {
		return nil
	}
	if h, ok := o.(Hooks); ok && h.empty() {
		return nil
	}
	return optionFunc(func(opts *options) { opts.observers = append(opts.observers, o) })
}

// WithStoppedRetention sets how many stopped subscriptions Status keeps
// (the most recent ones, with their reason in LastErr), so that a
// subscription that ended (its context, a permanent error, Unsubscribe)
// stays visible. Default: DefaultStoppedRetention (100). 0 keeps none; n
// must not be negative. Each retained entry costs one Status value.
func WithStoppedRetention(n int) Option {
	return optionFunc(func(o *options) {
		if n < 0 {
			o.errs = append(o.errs, argError("subscriber.WithStoppedRetention", "n", "must not be negative"))
			return
		}
		o.keepStopped = n
	})
}

// WithBudget bounds the subscriptions' retries with b, a
// rebound.RetryBudget that may be shared with other Managers, failback or
// Retry calls: the first attempt of a confirmation run is a deposit, each
// retry withdraws when it is due. A retry the budget refuses is not sent
// and waits the next backoff step (rebound.RefuseDefer): a subscription
// never gives up because of it. Deferrals show in Status.Deferred and
// Status.DeferReason (rebound.ErrBudgetExhausted) and as Deferral events.
// Default: none. A nil b is ignored; a zero RetryBudget makes New fail.
func WithBudget(b *rebound.RetryBudget) Option {
	return optionFunc(func(o *options) {
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

// WithThrottle makes the subscriptions' retries ask t, a
// rebound.AdaptiveThrottle that may be shared, before they are sent; every
// acknowledged Registry.Subscribe is an accept. First attempts of a run
// are never throttled: subscribed subscriptions send nothing, so after a
// healthy registry restart the throttle's window holds no accept, and
// throttling those confirmations cost 37-62 s instead of 0 s for 50
// subscriptions (docs/engine.md). A rejected retry is not sent and waits
// the next backoff step (rebound.RefuseDefer): a subscription never gives
// up because of it (Status.Deferred, Status.DeferReason
// rebound.ErrThrottled, Deferral events). Default: none. A nil t is
// ignored; a zero AdaptiveThrottle makes New fail.
func WithThrottle(t *rebound.AdaptiveThrottle) Option {
	return optionFunc(func(o *options) {
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
