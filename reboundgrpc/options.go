package reboundgrpc

import (
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/subscriber"
)

// Defaults of a Builder.
const (
	// DefaultScheme is the scheme of a Builder without WithScheme.
	DefaultScheme = "rebound"

	// DefaultLinger is how long a shared subscription outlives its last
	// resolver (see WithLinger).
	DefaultLinger = 30 * time.Second

	// DefaultResolveNowInterval is the least time between two
	// re-confirmations of one subscription asked for by ResolveNow (see
	// WithResolveNowInterval): a second longer than the Manager's own
	// refresh interval (5 s, subscriber.WithRefreshInterval), so that the
	// Manager does not drop the re-confirmation sent at the end of an interval.
	DefaultResolveNowInterval = 5*time.Second + time.Second

	// DefaultUnresolvedReport is when a ClientConn that has no address yet
	// first hears the registry's error (see WithUnresolvedReport).
	DefaultUnresolvedReport = time.Second
)

// DefaultFilter is the instance filter of a Builder without WithFilter: it
// keeps instances that are both Healthy and Enabled.
func DefaultFilter(in subscriber.Instance) bool { return in.Healthy && in.Enabled }

// An Option configures NewBuilder.
type Option interface {
	apply(*options)
}

type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

type options struct {
	scheme     string
	linger     time.Duration
	filter     func(subscriber.Instance) bool
	custom     bool // filter was set by WithFilter
	policy     rebound.Policy
	rnInterval time.Duration
	unresolved time.Duration
	log        *zap.Logger
	observers  []rebound.Observer
	mp         metric.MeterProvider
	errs       []error
}

func (o *options) bad(fn, arg, reason string) {
	o.errs = append(o.errs, &rebound.ArgumentError{Func: "reboundgrpc." + fn, Arg: arg, Reason: reason})
}

// WithScheme sets the target scheme the Builder answers to. Default:
// DefaultScheme ("rebound"). It must be a valid URL scheme (a letter, then
// letters, digits, '+', '-' or '.'); grpc-go lower-cases schemes, so it must
// be lower case.
func WithScheme(s string) Option {
	return optionFunc(func(o *options) {
		if !validScheme(s) {
			o.bad("WithScheme", "s", "must be a lower-case URL scheme (a letter, then letters, digits, '+', '-' or '.')")
			return
		}
		o.scheme = s
	})
}

func validScheme(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		switch {
		case c >= 'a' && c <= 'z':
		case i > 0 && (c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.'):
		default:
			return false
		}
	}
	return true
}

// WithLinger sets how long a subscription stays after the last resolver
// using it is closed (a ClientConn closed or gone idle), so that a resolver
// built again within d (the ClientConn leaving idle mode, a new ClientConn
// to the same target) gets the last list at once and costs the registry
// nothing. Default: DefaultLinger (30 s). 0 unsubscribes as soon as the
// last resolver is closed. d must not be negative.
func WithLinger(d time.Duration) Option {
	return optionFunc(func(o *options) {
		if d < 0 {
			o.bad("WithLinger", "d", "must not be negative (0 unsubscribes at once)")
			return
		}
		o.linger = d
	})
}

// WithFilter sets which instances reach the ClientConn. Default:
// DefaultFilter (Healthy and Enabled). A nil keep admits every instance.
// keep is called from each ClientConn's resolver goroutine, once per
// instance per list, outside any lock: a slow keep delays only the
// ClientConns it runs for, and keep may call Builder.Stats; it is called
// concurrently for different ClientConns, so it must be safe for
// concurrent use. It should not block. A panic in keep is recovered
// (counted in Stats.Panics, logged at Error with its stack): the
// ClientConns keep the last list keep accepted, a ClientConn that has none
// hears the panic (a *cluster.PanicError) through ReportError, and the
// next list is filtered again. When keep refuses every instance of a
// list, the Warn line and the ClientConn's error say so, without
// guessing its reasons.
func WithFilter(keep func(subscriber.Instance) bool) Option {
	return optionFunc(func(o *options) {
		if keep == nil {
			keep = func(subscriber.Instance) bool { return true }
		}
		o.filter, o.custom = keep, true
	})
}

// WithPolicy sets the backoff with which a resolver sends a state again
// after the ClientConn rejected it (UpdateState returned an error). Default:
// the zero rebound.Policy (full jitter, 1 s doubling to 30 s). The retries
// never give up while the resolver lives: p must be valid and leave
// MaxAttempts and MaxElapsed zero. A newer list replaces the one being
// retried at once.
func WithPolicy(p rebound.Policy) Option {
	return optionFunc(func(o *options) {
		if err := p.Validate(); err != nil {
			o.errs = append(o.errs, &rebound.ArgumentError{Func: "reboundgrpc.WithPolicy", Arg: "p", Reason: "is invalid", Err: err})
			return
		}
		if p.MaxAttempts != 0 || p.MaxElapsed != 0 {
			o.bad("WithPolicy", "p", "must leave MaxAttempts and MaxElapsed 0: a resolver retries until it is closed")
			return
		}
		o.policy = p
	})
}

// WithResolveNowInterval sets the least time between two re-confirmations
// of one subscription that ResolveNow asks for. ResolveNow calls of every
// ClientConn sharing the subscription are coalesced: the first one after a
// quiet interval is served at once, the others in the interval are served
// by one re-confirmation at its end. Default: DefaultResolveNowInterval
// (6 s). d must be positive. Each re-confirmation is
// Subscription.Refresh, which the Manager itself ignores within its
// subscriber.WithRefreshInterval (5 s by default) of the previous one and
// while the subscription is not subscribed: keep d above the Manager's
// interval.
func WithResolveNowInterval(d time.Duration) Option {
	return optionFunc(func(o *options) {
		if d <= 0 {
			o.bad("WithResolveNowInterval", "d", "must be > 0")
			return
		}
		o.rnInterval = d
	})
}

// WithUnresolvedReport sets when a ClientConn that has received no address
// yet (the registry is slow or down at Build) hears the subscription's last
// error through ReportError, so that fail-fast RPCs fail with Unavailable
// instead of waiting for their deadline; RPCs with grpc.WaitForReady(true)
// keep waiting. From d after Build on, each new error the key's view pushes
// (subscriber.Snapshot.Unresolved) is reported until the first list
// arrives. Default: DefaultUnresolvedReport (1 s).
// 0 never reports (every RPC waits for the first list or its deadline). d
// must not be negative.
func WithUnresolvedReport(d time.Duration) Option {
	return optionFunc(func(o *options) {
		if d < 0 {
			o.bad("WithUnresolvedReport", "d", "must not be negative (0 never reports)")
			return
		}
		o.unresolved = d
	})
}

// WithLogger sets the logger (Info for subscriptions started and stopped,
// Warn for rejected states, Debug for each state sent). Default: none.
// Credentials are scrubbed (logging.Redacted). The
// global zap logger is never used.
func WithLogger(l *zap.Logger) Option {
	return optionFunc(func(o *options) { o.log = l })
}

// WithObserver adds o as an observer of the loops that send a rejected
// state again (one per resolver while the ClientConn rejects its state):
// rebound.EventAttempt after each send, EventRetry with the delay before
// the next, EventRecovered when a send is accepted after a rejection
// (rebound.Hooks is the typed adapter). Observers are called from the
// resolver's goroutine, never under a lock: a slow one delays that
// resolver's next send, nothing else. An observer that panics is
// recovered (counted in Stats.Panics, logged at Error with its stack) and
// the loop goes on. Several add up; a nil o is ignored. Default: none.
func WithObserver(o rebound.Observer) Option {
	if rebound.IsNilObserver(o) {
		return nil
	}
	return optionFunc(func(opts *options) { opts.observers = append(opts.observers, o) })
}

// WithMeterProvider reports the Builder's OpenTelemetry metrics through mp:
// rebound.grpc.subscriptions and rebound.grpc.resolvers (current numbers),
// rebound.grpc.resolve_now{result=refreshed|coalesced} and
// rebound.grpc.rejected_states (totals), all read from Stats when the
// reader collects, plus the retry metrics of the loops that send rejected
// states again (rebound.retry.*, component=reboundgrpc). Default: none
// (nil). Nothing global is used.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return optionFunc(func(o *options) { o.mp = mp })
}
