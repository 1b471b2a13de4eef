package etcd

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/subscriber"
)

// Defaults of a Registry and a Registration.
const (
	// DefaultAttemptTimeout bounds one Registry.Subscribe attempt (the
	// Get and the creation of the watch) and one registration attempt.
	DefaultAttemptTimeout = 5 * time.Second
	// DefaultTTL is the lease TTL of a Registration: an instance whose
	// process died disappears this long after its last keep-alive.
	DefaultTTL = 10 * time.Second
)

// An Option configures New and Register. Each option says which of them
// it applies to; the other one ignores it.
type Option interface {
	apply(*options)
}

type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

type options struct {
	prefix  string
	log     *zap.Logger
	timeout time.Duration
	ttl     time.Duration
	policy  rebound.Policy
	errs    []error
}

func newOptions(fn string, opts []Option) (options, error) {
	o := options{
		prefix:  DefaultPrefix,
		log:     zap.NewNop(),
		timeout: DefaultAttemptTimeout,
		ttl:     DefaultTTL,
	}
	for _, opt := range opts {
		if opt == nil {
			o.errs = append(o.errs, &subscriber.ArgumentError{Func: fn, Arg: "opts", Reason: "contains a nil Option"})
			continue
		}
		opt.apply(&o)
	}
	if len(o.errs) > 0 {
		return o, errors.Join(o.errs...)
	}
	return o, nil
}

// WithPrefix sets the key prefix under which instances live (New and
// Register). Default: DefaultPrefix ("/rebound/services"). It must not be
// empty and must not end with "/" (the layout adds the separators). Use
// the same prefix on the provider and the consumer side.
func WithPrefix(prefix string) Option {
	return optionFunc(func(o *options) {
		switch {
		case prefix == "":
			o.errs = append(o.errs, &subscriber.ArgumentError{Func: "WithPrefix", Arg: "prefix", Reason: "is empty"})
		case strings.HasSuffix(prefix, "/"):
			o.errs = append(o.errs, &subscriber.ArgumentError{Func: "WithPrefix", Arg: "prefix",
				Reason: fmt.Sprintf("%q ends with %q (the layout adds the separators)", prefix, "/")})
		default:
			o.prefix = prefix
		}
	})
}

// WithLogger sets the logger (New and Register). Default: zap.NewNop();
// nil also means no logging. The global zap logger is never used.
// Broken watches, revision regressions, undecodable values and lease
// losses are logged at Warn, everything else at Debug.
func WithLogger(l *zap.Logger) Option {
	return optionFunc(func(o *options) {
		if l == nil {
			l = zap.NewNop()
		}
		o.log = l
	})
}

// WithAttemptTimeout bounds each attempt (New: one Registry.Subscribe
// call, that is the Get and the creation of the watch; Register: one
// grant-and-put). Default: DefaultAttemptTimeout (5 s). d must be
// positive. The context of the call bounds the attempt too.
func WithAttemptTimeout(d time.Duration) Option {
	return optionFunc(func(o *options) {
		if d <= 0 {
			o.errs = append(o.errs, &subscriber.ArgumentError{Func: "WithAttemptTimeout", Arg: "d",
				Reason: fmt.Sprintf("is %v; it must be positive", d)})
			return
		}
		o.timeout = d
	})
}

// WithTTL sets the lease TTL of a registration (Register only). Default:
// DefaultTTL (10 s). etcd counts TTLs in whole seconds: d must be at least
// one second and is rounded up to a whole second. The server may raise a
// TTL below its minimum (1.5 election timeouts).
func WithTTL(d time.Duration) Option {
	return optionFunc(func(o *options) {
		if d < time.Second {
			o.errs = append(o.errs, &subscriber.ArgumentError{Func: "WithTTL", Arg: "d",
				Reason: fmt.Sprintf("is %v; it must be at least 1s", d)})
			return
		}
		o.ttl = d
	})
}

// WithPolicy sets the backoff between the attempts to register again
// after the lease was lost (Register only). Default: the zero
// rebound.Policy (full jitter, 1 s doubling to 30 s). p must be valid and
// must leave MaxAttempts and MaxElapsed zero: a registration keeps trying
// until it is closed.
func WithPolicy(p rebound.Policy) Option {
	return optionFunc(func(o *options) {
		if err := p.Validate(); err != nil {
			o.errs = append(o.errs, &subscriber.ArgumentError{Func: "WithPolicy", Arg: "p", Reason: "is invalid", Err: err})
			return
		}
		if p.MaxAttempts != 0 || p.MaxElapsed != 0 {
			o.errs = append(o.errs, &subscriber.ArgumentError{Func: "WithPolicy", Arg: "p",
				Reason: "must leave MaxAttempts and MaxElapsed zero: a registration retries until it is closed"})
			return
		}
		o.policy = p
	})
}
