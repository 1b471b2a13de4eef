package subscriber

import (
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"
	"golang.org/x/time/rate"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/internal/admit"
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

// An Option configures a Manager (New).
type Option interface {
	apply(*options)
}

type managerOpt func(*options)

func (o managerOpt) apply(opts *options) { o(opts) }

type options struct {
	policy      rebound.Policy
	log         *zap.Logger
	limiter     *rate.Limiter
	limiterSet  bool
	hold        time.Duration
	confirmCap  time.Duration
	refreshMin  time.Duration
	reconcile   time.Duration
	observers   []rebound.Observer // WithPolicy's rebound.WithObserver (observe)
	keepStopped int
	budget      *rebound.RetryBudget      // tests only (export_test.go)
	throttle    *rebound.AdaptiveThrottle // tests only (export_test.go)
	ropts       []rebound.Option          // WithPolicy's
	// WithPolicy's rebound.WithMeterProvider (observe, metrics.go)
	meterProvider metric.MeterProvider
	meterAttrs    []attribute.KeyValue
	errs          []error
}

// WithPolicy sets the subscriptions' backoff, admission and observers.
// Default: the zero rebound.Policy and a limiter of 1,000/s, burst 100.
// opts take rebound.WithLimiter, WithBudget, WithThrottle, WithObserver and
// WithMeterProvider; they add up. Limits (WithMaxAttempts, WithMaxElapsed)
// and WithTracerProvider do not apply: subscriptions never give up.
// docs/observability.md lists the events and the metrics.
func WithPolicy(p rebound.Policy, opts ...rebound.Option) Option {
	return managerOpt(func(o *options) {
		if _, err := rebound.NewRetrier(p); err != nil {
			o.errs = append(o.errs, &rebound.ArgumentError{Func: "subscriber.WithPolicy", Arg: "p", Reason: "is invalid", Err: err})
			return
		}
		o.policy = p
		for _, ro := range opts {
			if ro != nil {
				o.ropts = append(o.ropts, ro)
			}
		}
	})
}

// WithLogger sets the logger; default and nil: none. Each subscription logs
// a few throttled lines per outage, with credentials scrubbed.
func WithLogger(l *zap.Logger) Option {
	return managerOpt(func(o *options) { o.log = l })
}

// WithEmptyListHold sets how long an empty list after a disconnection is held
// back while providers re-register. Default: 30 s; 0: no hold; d must not be
// negative. The rules: docs/guide.md.
func WithEmptyListHold(d time.Duration) Option {
	return managerOpt(func(o *options) {
		if d < 0 {
			o.errs = append(o.errs, argError("subscriber.WithEmptyListHold", "d", "must not be negative (0 disables the hold)"))
			return
		}
		o.hold = d
	})
}

// WithConfirmTimeout caps the wait for a confirming adapter after a reconnect;
// the Manager then confirms itself. Default: 15 s; d must be positive.
func WithConfirmTimeout(d time.Duration) Option {
	return managerOpt(func(o *options) {
		if d <= 0 {
			o.errs = append(o.errs, argError("subscriber.WithConfirmTimeout", "d", "must be positive"))
			return
		}
		o.confirmCap = d
	})
}

// WithReconcile compares each list with Reconciler.Lookup's about once per
// period (±25%). A difference is delivered and resubscribed. Default: 0, off;
// else at least 1 s.
func WithReconcile(period time.Duration) Option {
	return managerOpt(func(o *options) {
		if period != 0 && period < minReconcilePeriod {
			o.errs = append(o.errs, argError("subscriber.WithReconcile", "period", "must be 0 (off) or at least 1s"))
			return
		}
		o.reconcile = period
	})
}

// observe takes WithPolicy's observers and meter for the Manager's own
// events and instruments; retriers drops them from the subscriptions'
// Retriers (admit.Unobserved). An empty Hooks observes nothing and is
// left out.
func (o *options) observe() {
	e := admit.Engine(o.ropts)
	for _, ob := range admit.Observers[rebound.Observer](e) {
		if h, ok := ob.(interface{ empty() bool }); ok && h.empty() {
			continue
		}
		o.observers = append(o.observers, ob)
	}
	o.meterProvider, o.meterAttrs = e.MeterProvider, e.MeterAttrs
}
