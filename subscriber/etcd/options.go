package etcd

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/internal/sat"
	"github.com/rebound-go/rebound/logging"
)

// Defaults of a Registry and a Registration.
const (
	// DefaultAttemptTimeout bounds one Registry.Subscribe or Lookup
	// attempt (the Get and the creation of the watch) and one request of
	// a Registration.
	DefaultAttemptTimeout = 5 * time.Second
	// DefaultTTL is the lease TTL of a Registration: an instance whose
	// process died disappears this long after its last keep-alive (one
	// that stops with Registration.Shutdown disappears at once).
	//
	// It follows the rule of the package documentation ("Leases and
	// keep-alive"): TTL >= 1.5 x (keep-alive time + keep-alive timeout +
	// 2 s). With ClientConfig's ClientKeepAliveTime (10 s, gRPC's
	// minimum) and ClientKeepAliveTimeout (3 s) that is 22.5 s: a client
	// whose member is blackholed leaves it for another before the lease
	// can expire. (The previous default, 10 s with a 10 s + 5 s keep-alive
	// detection, let it expire; TestBlackholedMemberKeepsLease.)
	DefaultTTL = 30 * time.Second
)

// An Option configures New. WithPrefix, WithLogger, WithAttemptTimeout
// and WithLayout return a SharedOption, which configures Register too.
// A nil Option is ignored.
type Option interface {
	applyNew(*registryOptions)
}

// A RegisterOption configures Register: WithTTL, WithPolicy and every
// SharedOption. A nil RegisterOption is ignored.
type RegisterOption interface {
	applyRegister(*registerOptions)
}

// A SharedOption configures both New and Register (use the same prefix
// and layout on the provider and the consumer side).
type SharedOption interface {
	Option
	RegisterOption
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
	return common{prefix: DefaultPrefix, log: zap.NewNop(), timeout: DefaultAttemptTimeout}
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
	obs    []rebound.Observer
	meter  metric.MeterProvider
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

func newRegisterOptions(opts []RegisterOption) (registerOptions, error) {
	o := registerOptions{common: defaultCommon(), ttl: DefaultTTL}
	for _, opt := range opts {
		if opt != nil {
			opt.applyRegister(&o)
		}
	}
	return o, o.err()
}

// sharedOption is a SharedOption changing the common settings.
type sharedOption func(*common)

func (f sharedOption) applyNew(o *registryOptions)      { f(&o.common) }
func (f sharedOption) applyRegister(o *registerOptions) { f(&o.common) }

// registerOption is a RegisterOption only.
type registerOption func(*registerOptions)

func (f registerOption) applyRegister(o *registerOptions) { f(o) }

func argErr(fn, arg, reason string) *rebound.ArgumentError {
	return &rebound.ArgumentError{Func: "etcd." + fn, Arg: arg, Reason: reason}
}

// WithPrefix sets the key prefix under which the default layout keeps
// instances (New and Register). Default: DefaultPrefix
// ("/rebound/services"). It must not be empty and must not end with "/"
// (the layout adds the separators). Use the same prefix on the provider
// and the consumer side. WithLayout replaces the layout, prefix included.
func WithPrefix(prefix string) SharedOption {
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
// Register). Default: the rebound layout under WithPrefix's prefix (see
// the package documentation); EndpointsLayout reads and writes the layout
// of etcd's own client/v3/naming/endpoints. l must not be nil.
func WithLayout(l Layout) SharedOption {
	return sharedOption(func(o *common) {
		if l == nil {
			o.errs = append(o.errs, argErr("WithLayout", "l", "must not be nil"))
			return
		}
		o.layout = l
	})
}

// WithLogger sets the logger (New and Register). Default: zap.NewNop();
// nil also means no logging. The global zap logger is never used.
// Broken watches, revision regressions, undecodable values and lease
// losses are logged at Warn, repairs at Info, everything else at Debug.
// Credentials are scrubbed (logging.Redacted).
func WithLogger(l *zap.Logger) SharedOption {
	return sharedOption(func(o *common) {
		o.log = logging.Redacted(l) // nil: zap.NewNop()
	})
}

// WithAttemptTimeout bounds each attempt (New: one Registry.Subscribe or
// Lookup call, that is the Get and the creation of the watch; Register:
// each request of the registration). Default: DefaultAttemptTimeout
// (5 s). d must be positive. The context of the call bounds the attempt
// too.
func WithAttemptTimeout(d time.Duration) SharedOption {
	return sharedOption(func(o *common) {
		if d <= 0 {
			o.errs = append(o.errs, argErr("WithAttemptTimeout", "d", fmt.Sprintf("must be > 0; got %v", d)))
			return
		}
		o.timeout = d
	})
}

// WithTTL sets the lease TTL of a registration. Default: DefaultTTL
// (30 s; see there for the rule it follows). etcd counts TTLs in whole
// seconds: d is rounded up to a whole second and must be from 1 s to
// etcd's largest TTL, 9,000,000,000 s (2,500,000 h). The server may raise
// a TTL below its minimum (1.5 election timeouts).
func WithTTL(d time.Duration) RegisterOption {
	return registerOption(func(o *registerOptions) {
		if d < time.Second || sat.RoundUp(d, time.Second) > maxTTL {
			o.errs = append(o.errs, argErr("WithTTL", "d", fmt.Sprintf("must be from 1s to %v (etcd's largest lease TTL); got %v", maxTTL, d)))
			return
		}
		o.ttl = d
	})
}

// maxTTL is etcd's largest lease TTL (its lease.MaxLeaseTTL).
const maxTTL = 9_000_000_000 * time.Second

// WithPolicy sets the backoff between the attempts of a registration to
// repair itself (probe its lease, register again, put its key back).
// Default: the zero rebound.Policy (full jitter, 1 s doubling to 30 s).
// Its Max (and a server's Retry-After) is capped at a third of the TTL
// (the keep-alive period, 10 s with DefaultTTL): the old lease may still
// be alive while a repair fails, and a lease extended by a new leader
// must be found alive before it expires. p must be valid and must leave
// MaxAttempts and MaxElapsed zero: a registration keeps trying until it
// is closed.
func WithPolicy(p rebound.Policy) RegisterOption {
	return registerOption(func(o *registerOptions) {
		if err := p.Validate(); err != nil {
			o.errs = append(o.errs, &rebound.ArgumentError{Func: "etcd.WithPolicy", Arg: "p", Reason: "must be valid", Err: err})
			return
		}
		if p.MaxAttempts != 0 || p.MaxElapsed != 0 {
			o.errs = append(o.errs, argErr("WithPolicy", "p",
				"must leave MaxAttempts and MaxElapsed zero (a registration retries until it is closed)"))
			return
		}
		o.policy = p
	})
}

// WithRegistrationObserver adds o as an observer of the registration's
// state changes and requests (see subscriber.RegistrationHooks, the typed
// adapter, for the events and the guarantees). Several add up; a nil o is
// ignored. Default: none.
func WithRegistrationObserver(o rebound.Observer) RegisterOption {
	if rebound.IsNilObserver(o) {
		return nil
	}
	return registerOption(func(opts *registerOptions) { opts.obs = append(opts.obs, o) })
}

// WithMeterProvider records the registration's OpenTelemetry metrics with
// mp, on the meter "github.com/rebound-go/rebound", with
// registry="etcd": rebound.registration.registrations{state} (1 for its
// current state), rebound.registration.requests{op, result} and
// rebound.registration.repairs, all observable (one collection callback
// per Registration, unregistered when it stops). Default (and for nil):
// no metrics; no global MeterProvider is used.
func WithMeterProvider(mp metric.MeterProvider) RegisterOption {
	return registerOption(func(o *registerOptions) { o.meter = mp })
}
