package subscriber

import (
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"
	"golang.org/x/time/rate"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/internal/nilness"
)

// Defaults of a Manager (each is stated in its option's doc).
const (
	defaultLimit            rate.Limit = 1000 // tokens per second of the shared limiter
	defaultBurst            int        = 100
	defaultEmptyListHold               = 30 * time.Second
	defaultConfirmTimeout              = 15 * time.Second
	defaultRefreshInterval             = 5 * time.Second
	defaultStoppedRetention            = 100 // stopped subscriptions kept in Status
	minReconcilePeriod                 = time.Second
	unsubscribeTimeout                 = 10 * time.Second // bounds each Registry.Unsubscribe call
)

// An Option configures a Manager (New) or a WatchGroup (NewWatchGroup:
// the options named Watch...). Each refuses the other's options with an
// *rebound.ArgumentError.
type Option interface {
	apply(*options)
	applyWatch(*WatchGroup)
}

// managerOpt is an Option of New; NewWatchGroup refuses it.
type managerOpt struct {
	name string
	f    func(*options)
}

func managerOption(name string, f func(*options)) Option { return managerOpt{name, f} }

func (o managerOpt) apply(opts *options) { o.f(opts) }
func (o managerOpt) applyWatch(g *WatchGroup) {
	g.errs = append(g.errs, argError("subscriber.Manager.NewWatchGroup", "opts",
		"must not hold subscriber."+o.name+", which configures New only"))
}

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

// WithPolicy sets the backoff of every subscription's retry loop.
// Default: the zero rebound.Policy (full jitter, 1 s doubling to 30 s).
// p must be valid and leave MaxAttempts and MaxElapsed zero: a subscription
// never gives up on a transient error.
func WithPolicy(p rebound.Policy) Option {
	return managerOption("WithPolicy", func(o *options) {
		if err := p.Validate(); err != nil {
			o.errs = append(o.errs, &rebound.ArgumentError{Func: "subscriber.WithPolicy", Arg: "p", Reason: "is invalid", Err: err})
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

// WithLogger sets the logger; default and nil: none. Each subscription
// logs a few throttled lines per outage, each attempt at Debug, with its key.
// Credentials are scrubbed (logging.Redacted).
func WithLogger(l *zap.Logger) Option {
	return managerOption("WithLogger", func(o *options) { o.log = l })
}

// WithLimiter sets the limiter shared by the Manager's retries and
// reconnect confirmations (a subscription's first attempt takes no token).
// Default: 1,000 per second, bursts of 100; nil: no limit. A finite rate
// needs a burst of at least 1.
func WithLimiter(l *rate.Limiter) Option {
	return managerOption("WithLimiter", func(o *options) {
		if l != nil && l.Limit() != rate.Inf && l.Burst() < 1 {
			o.errs = append(o.errs, argError("subscriber.WithLimiter", "l", "has a burst below 1 and a finite rate: it would never grant a token"))
			return
		}
		o.limiter, o.limiterSet = l, true
	})
}

// WithEmptyListHold sets how long an empty list is held back after a
// disconnection or restart, so listeners keep the last good list while
// providers re-register. Default: 30 s; 0 delivers empty lists at once;
// d must not be negative. The rules in full: docs/guide.md.
func WithEmptyListHold(d time.Duration) Option {
	return managerOption("WithEmptyListHold", func(o *options) {
		if d < 0 {
			o.errs = append(o.errs, argError("subscriber.WithEmptyListHold", "d", "must not be negative (0 disables the hold)"))
			return
		}
		o.hold = d
	})
}

// WithConfirmTimeout caps the wait for a ReconnectConfirmer after a
// reconnect: an unconfirmed subscription is then confirmed by the Manager
// (reason ErrNotConfirmed). Default: 15 s; d must be positive. Other
// registries ignore it.
func WithConfirmTimeout(d time.Duration) Option {
	return managerOption("WithConfirmTimeout", func(o *options) {
		if d <= 0 {
			o.errs = append(o.errs, argError("subscriber.WithConfirmTimeout", "d", "must be positive"))
			return
		}
		o.confirmCap = d
	})
}

// WithRefreshInterval sets the shortest time between two
// re-confirmations started by Subscription.Refresh. Default: 5 s; d must
// be positive.
func WithRefreshInterval(d time.Duration) Option {
	return managerOption("WithRefreshInterval", func(o *options) {
		if d <= 0 {
			o.errs = append(o.errs, argError("subscriber.WithRefreshInterval", "d", "must be positive"))
			return
		}
		o.refreshMin = d
	})
}

// WithReconcile makes each subscription compare its list with the
// server's (Reconciler.Lookup) about once per period, jittered by ±25%.
// A difference is delivered and resubscribed (ErrOutOfSync). Default: 0,
// off; period must be 0 or at least 1 s. Costs: docs/subscription.md.
func WithReconcile(period time.Duration) Option {
	return managerOption("WithReconcile", func(o *options) {
		if period != 0 && period < minReconcilePeriod {
			o.errs = append(o.errs, argError("subscriber.WithReconcile", "period", "must be 0 (off) or at least 1s"))
			return
		}
		o.reconcile = period
	})
}

// WithObserver adds o as an observer of the Manager's events (see Hooks).
// Several are called in order, after the metrics of WithMeterProvider.
// A nil o is ignored.
func WithObserver(o rebound.Observer) Option {
	if nilness.Is(o) {
		return nil
	}
	if h, ok := o.(Hooks); ok && h.empty() {
		return nil
	}
	return managerOption("WithObserver", func(opts *options) { opts.observers = append(opts.observers, o) })
}

// WithBudget bounds the subscriptions' retries with b, which may be
// shared. A refused retry waits the next backoff step (Status.Deferred,
// Deferral events); a subscription never gives up on it. A nil b is
// ignored; a zero RetryBudget makes New fail.
func WithBudget(b *rebound.RetryBudget) Option {
	return managerOption("WithBudget", func(o *options) {
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
	return managerOption("WithThrottle", func(o *options) {
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
