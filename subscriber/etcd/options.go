package etcd

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/internal/admit"
	"github.com/rebound-go/rebound/internal/sat"
	"github.com/rebound-go/rebound/logging"
)

// Defaults of a Registry and a Registration.
const (
	defaultAttemptTimeout = 5 * time.Second
	// defaultTTL follows the rule of the package documentation ("Leases
	// and keep-alive") with ClientConfig's keep-alive: 1.5 x (10 s + 3 s +
	// 2 s) = 22.5 s.
	defaultTTL = 30 * time.Second
)

// An Option configures New or Register. WithTTL and WithPolicy configure
// Register only: New refuses them. A nil Option is ignored.
type Option interface {
	applyNew(*registryOptions)
	applyRegister(*registerOptions)
}

// common are the settings New and Register share.
type common struct {
	prefix  string
	layout  Layout // nil: the rebound layout under prefix
	log     *zap.Logger
	timeout time.Duration
	errs    []error
}

func defaultCommon() common {
	return common{prefix: defaultPrefix, log: zap.NewNop(), timeout: defaultAttemptTimeout}
}

func (c *common) err() error { return errors.Join(c.errs...) }

// resolvedLayout returns the layout in effect.
func (c *common) resolvedLayout() Layout {
	if c.layout != nil {
		return c.layout
	}
	return reboundLayout{prefix: c.prefix}
}

type registryOptions struct {
	common
}

type registerOptions struct {
	common
	ttl    time.Duration
	policy rebound.Policy
	obs    []rebound.Observer   // WithPolicy's rebound.WithObserver
	meter  metric.MeterProvider // WithPolicy's rebound.WithMeterProvider
}

func newRegistryOptions(opts []Option) (registryOptions, error) {
	o := registryOptions{common: defaultCommon()}
	for _, opt := range opts {
		if opt != nil {
			opt.applyNew(&o)
		}
	}
	return o, o.err()
}

func newRegisterOptions(opts []Option) (registerOptions, error) {
	o := registerOptions{common: defaultCommon(), ttl: defaultTTL}
	for _, opt := range opts {
		if opt != nil {
			opt.applyRegister(&o)
		}
	}
	return o, o.err()
}

// sharedOption is an Option changing the common settings.
type sharedOption func(*common)

func (f sharedOption) applyNew(o *registryOptions)      { f(&o.common) }
func (f sharedOption) applyRegister(o *registerOptions) { f(&o.common) }

// registerOption is an Option of Register only; New refuses it.
type registerOption struct {
	name string
	f    func(*registerOptions)
}

func regOnly(name string, f func(*registerOptions)) Option {
	return registerOption{"etcd." + name, f}
}

func (r registerOption) applyRegister(o *registerOptions) { r.f(o) }
func (r registerOption) applyNew(o *registryOptions) {
	o.errs = append(o.errs, argErr("New", "opts", "must not hold "+r.name+", which configures Register only"))
}

func argErr(fn, arg, reason string) *rebound.ArgumentError {
	return &rebound.ArgumentError{Func: "etcd." + fn, Arg: arg, Reason: reason}
}

// withPrefix sets the key prefix of the default layout (New and
// Register). Default: "/rebound/services". It must not be empty nor end
// with "/". WithLayout replaces the layout, prefix included.
func withPrefix(prefix string) Option {
	return sharedOption(func(o *common) {
		switch {
		case prefix == "":
			o.errs = append(o.errs, argErr("WithPrefix", "prefix", "must not be empty"))
		case strings.HasSuffix(prefix, "/"):
			o.errs = append(o.errs, argErr("WithPrefix", "prefix",
				fmt.Sprintf("must not end with %q (the layout adds the separators); got %q", "/", prefix)))
		default:
			o.prefix = prefix
		}
	})
}

// WithLayout sets how services map to etcd keys and values (New and
// Register). Default: the rebound layout under withPrefix's prefix;
// EndpointsLayout(nil) is etcd's naming/endpoints layout. l must not be nil.
func WithLayout(l Layout) Option {
	return sharedOption(func(o *common) {
		if l == nil {
			o.errs = append(o.errs, argErr("WithLayout", "l", "must not be nil"))
			return
		}
		o.layout = l
	})
}

// WithLogger sets the logger (New and Register); default and nil: none.
// Broken watches and lease losses are logged at Warn, repairs at Info, the
// rest at Debug. Credentials are scrubbed (logging.Redacted).
func WithLogger(l *zap.Logger) Option {
	return sharedOption(func(o *common) {
		o.log = logging.Redacted(l) // nil: zap.NewNop()
	})
}

// withAttemptTimeout bounds each attempt: a Subscribe or Lookup (New),
// or one request of a registration (Register). Default: 5 s; d must be
// positive.
func withAttemptTimeout(d time.Duration) Option {
	return sharedOption(func(o *common) {
		if d <= 0 {
			o.errs = append(o.errs, argErr("WithAttemptTimeout", "d", fmt.Sprintf("must be > 0; got %v", d)))
			return
		}
		o.timeout = d
	})
}

// WithTTL sets the lease TTL of a registration (Register only).
// Default: 30 s (see "Leases and keep-alive" in the package doc). d is
// rounded up to whole seconds, from 1 s to 9,000,000,000 s.
func WithTTL(d time.Duration) Option {
	return regOnly("WithTTL", func(o *registerOptions) {
		if d < time.Second || sat.RoundUp(d, time.Second) > maxTTL {
			o.errs = append(o.errs, argErr("WithTTL", "d", fmt.Sprintf("must be from 1s to %v (etcd's largest lease TTL); got %v", maxTTL, d)))
			return
		}
		o.ttl = d
	})
}

// maxTTL is etcd's largest lease TTL (its lease.MaxLeaseTTL).
const maxTTL = 9_000_000_000 * time.Second

// WithPolicy sets the backoff of a registration's repairs and its
// observers (Register only). Default: the zero rebound.Policy; waits are
// capped at a third of the TTL. p must be valid; a registration retries
// until it is closed. opts take rebound.WithObserver (the registration's
// events) and WithMeterProvider (its metrics, docs/observability.md) only.
func WithPolicy(p rebound.Policy, opts ...rebound.Option) Option {
	return regOnly("WithPolicy", func(o *registerOptions) {
		if _, err := rebound.NewRetrier(p, opts...); err != nil {
			o.errs = append(o.errs, &rebound.ArgumentError{Func: "etcd.WithPolicy", Arg: "p", Reason: "must be valid", Err: err})
			return
		}
		for _, ro := range opts {
			if ro != nil && !admit.Observing(ro) {
				o.errs = append(o.errs, argErr("WithPolicy", "opts", "may hold only rebound.WithObserver and rebound.WithMeterProvider: a registration passes no gate and never stops"))
				return
			}
		}
		o.policy = p
		e := admit.Engine(opts)
		o.obs = append(o.obs, admit.Observers[rebound.Observer](e)...)
		if e.MeterProvider != nil {
			o.meter = e.MeterProvider
		}
	})
}
