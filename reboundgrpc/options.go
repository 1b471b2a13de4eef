package reboundgrpc

import (
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/internal/admit"
	"github.com/rebound-go/rebound/subscriber"
)

// Defaults of a Builder, stated in the options' docs.
const (
	scheme                    = "rebound"
	defaultLinger             = 30 * time.Second
	defaultResolveNowInterval = 5*time.Second + time.Second // a second above the Manager's refresh interval (5 s)
	defaultUnresolvedReport   = time.Second
)

// defaultFilter keeps instances that are both Healthy and Enabled.
func defaultFilter(in subscriber.Instance) bool { return in.Healthy && in.Enabled }

// An Option configures NewBuilder.
type Option interface {
	apply(*options)
}

type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

type options struct {
	linger     time.Duration
	filter     func(subscriber.Instance) bool
	custom     bool // filter was set by WithFilter
	policy     rebound.Policy
	rnInterval time.Duration
	unresolved time.Duration
	log        *zap.Logger
	observers  []rebound.Observer   // WithPolicy's rebound.WithObserver
	mp         metric.MeterProvider // WithPolicy's rebound.WithMeterProvider
	attrs      []attribute.KeyValue // and its attributes
	errs       []error
}

func (o *options) bad(fn, arg, reason string) {
	o.errs = append(o.errs, &rebound.ArgumentError{Func: "reboundgrpc." + fn, Arg: arg, Reason: reason})
}

// withLinger sets how long a subscription stays after its last resolver
// closed, so that a ClientConn leaving idle mode gets the last list at
// once. Default 30 s; 0 unsubscribes at once. d must not be negative.
func withLinger(d time.Duration) Option {
	return optionFunc(func(o *options) {
		if d < 0 {
			o.bad("WithLinger", "d", "must not be negative (0 unsubscribes at once)")
			return
		}
		o.linger = d
	})
}

// WithFilter sets which instances reach the ClientConn. Default: Healthy
// and Enabled ones; a nil keep admits all. keep runs concurrently for
// different ClientConns; a panic keeps the last accepted list.
func WithFilter(keep func(subscriber.Instance) bool) Option {
	return optionFunc(func(o *options) {
		if keep == nil {
			keep = func(subscriber.Instance) bool { return true }
		}
		o.filter, o.custom = keep, true
	})
}

// WithPolicy sets the backoff of sending a state again after the
// ClientConn rejected it, and its observers. Default: the zero
// rebound.Policy. p must be valid; a resolver retries until it is closed.
// opts take rebound.WithObserver and WithMeterProvider only; they add up.
// docs/grpc.md lists what each sees.
func WithPolicy(p rebound.Policy, opts ...rebound.Option) Option {
	return optionFunc(func(o *options) {
		if _, err := rebound.NewRetrier(p, opts...); err != nil {
			o.errs = append(o.errs, &rebound.ArgumentError{Func: "reboundgrpc.WithPolicy", Arg: "p", Reason: "is invalid", Err: err})
			return
		}
		for _, ro := range opts {
			if ro != nil && !admit.Observing(ro) {
				o.bad("WithPolicy", "opts", "may hold only rebound.WithObserver and rebound.WithMeterProvider: a resolver's re-sends pass no gate and never stop")
				return
			}
		}
		o.policy = p
		e := admit.Engine(opts)
		o.observers = append(o.observers, admit.Observers[rebound.Observer](e)...)
		if e.MeterProvider != nil {
			o.mp, o.attrs = e.MeterProvider, e.MeterAttrs
		}
	})
}

// withResolveNowInterval sets the least time between two
// re-confirmations that ResolveNow calls of one key lead to; calls in
// between are served by one at the interval's end. Default 6 s (keep it
// above a subscription's refresh interval, 5 s). d must be positive.
func withResolveNowInterval(d time.Duration) Option {
	return optionFunc(func(o *options) {
		if d <= 0 {
			o.bad("WithResolveNowInterval", "d", "must be > 0")
			return
		}
		o.rnInterval = d
	})
}

// withUnresolvedReport sets when a ClientConn with no address yet starts
// hearing the registry's errors through ReportError, so that fail-fast
// RPCs fail instead of waiting. Default 1 s after Build; 0 never reports.
// d must not be negative.
func withUnresolvedReport(d time.Duration) Option {
	return optionFunc(func(o *options) {
		if d < 0 {
			o.bad("WithUnresolvedReport", "d", "must not be negative (0 never reports)")
			return
		}
		o.unresolved = d
	})
}

// WithLogger sets the logger; credentials are scrubbed
// (logging.Redacted). Default: none.
func WithLogger(l *zap.Logger) Option {
	return optionFunc(func(o *options) { o.log = l })
}
