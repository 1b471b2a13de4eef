package reboundkratos

import (
	"math"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/logging"
	"github.com/rebound-go/rebound/subscriber"
)

// Defaults, stated in the options' docs.
const (
	defaultMaxPending = 1024
	defaultDrainDelay = 2 * time.Second
	defaultCluster    = "DEFAULT" // the contrib registry's
)

// An Option configures NewDiscovery or NewRegistrar, as its doc says. An
// option of the other constructor is a *rebound.ArgumentError; a nil
// Option is ignored.
type Option interface{ apply(*config) }

// config is what the options of one constructor set.
type config struct {
	fn string // the constructor
	d  *discoveryOptions
	r  *registrarOptions
}

// option is an Option for one constructor, or both.
type option struct {
	name string
	d    func(*discoveryOptions)
	r    func(*registrarOptions)
}

func (o option) apply(c *config) {
	switch {
	case c.d != nil && o.d != nil:
		o.d(c.d)
	case c.r != nil && o.r != nil:
		o.r(c.r)
	case c.d != nil:
		c.d.bad(c.fn, "opts", o.name+" does not apply to it")
	default:
		c.r.bad(c.fn, "opts", o.name+" does not apply to it")
	}
}

func discoveryOption(name string, f func(*discoveryOptions)) Option { return option{name: name, d: f} }
func registrarOption(name string, f func(*registrarOptions)) Option { return option{name: name, r: f} }
func sharedOption(name string, f func(*common)) Option {
	return option{name: name, d: func(o *discoveryOptions) { f(&o.common) }, r: func(o *registrarOptions) { f(&o.common) }}
}

func applyOptions(c *config, opts []Option) {
	for _, o := range opts {
		if o != nil {
			o.apply(c)
		}
	}
}

type common struct {
	group string
	log   *zap.Logger
	errs  []error
}

func (c *common) bad(fn, arg, reason string) {
	c.errs = append(c.errs, &rebound.ArgumentError{Func: "reboundkratos." + fn, Arg: arg, Reason: reason})
}

type discoveryOptions struct {
	common
	kind       string
	maxPending int
	keyFunc    func(name string) (subscriber.Key, error)
}

type registrarOptions struct {
	common
	cluster string
	weight  float64
	drain   time.Duration
	policy  rebound.Policy
}

// withGroup sets the Nacos group of FormatNacos, for both constructors
// (default "DEFAULT_GROUP", as the contrib registry). FormatEtcd has no
// group: a group there is an error.
func withGroup(group string) Option {
	return sharedOption("WithGroup", func(c *common) {
		if strings.Contains(group, "@@") || strings.TrimSpace(group) != group {
			c.bad("WithGroup", "group", `must not contain "@@" nor surrounding white space; got `+strconv.Quote(group))
			return
		}
		c.group = group
	})
}

// WithLogger sets the logger of both constructors (default: none).
// Credentials are scrubbed.
func WithLogger(l *zap.Logger) Option {
	return sharedOption("WithLogger", func(c *common) { c.log = logging.Redacted(l) })
}

// withKind sets the scheme a FormatNacos Discovery gives instances whose
// metadata has no "kind" (default "grpc", as the contrib registry).
func withKind(kind string) Option {
	return discoveryOption("WithKind", func(o *discoveryOptions) {
		if !knownSchemes[kind] {
			o.bad("WithKind", "kind", "must be grpc, grpcs, http or https; got "+strconv.Quote(kind))
			return
		}
		o.kind = kind
	})
}

// withMaxPending sets how many converted lists a Discovery's watcher
// keeps for Next (default 1024). Beyond that the oldest go. Lists that
// arrive while the watcher converts the one before coalesce before they
// reach this queue (see Discovery.Watch). n must be >= 1.
func withMaxPending(n int) Option {
	return discoveryOption("WithMaxPending", func(o *discoveryOptions) {
		if n < 1 {
			o.bad("WithMaxPending", "n", "must be >= 1; got "+strconv.Itoa(n))
			return
		}
		o.maxPending = n
	})
}

// WithKeyFunc sets the subscriber.Key a Discovery reads for a kratos
// service name (a group, namespace or clusters); default Key{Service:
// name}. fn runs with no lock held; its error or panic is returned by
// Watch or GetService. A nil fn is an error.
func WithKeyFunc(fn func(name string) (subscriber.Key, error)) Option {
	return discoveryOption("WithKeyFunc", func(o *discoveryOptions) {
		if fn == nil {
			o.bad("WithKeyFunc", "fn", "is nil")
			return
		}
		o.keyFunc = fn
	})
}

// withCluster sets the Nacos cluster a FormatNacos Registrar registers
// instances in (default "DEFAULT").
func withCluster(cluster string) Option {
	return registrarOption("WithCluster", func(o *registrarOptions) {
		if strings.TrimSpace(cluster) == "" || strings.Contains(cluster, ",") {
			o.bad("WithCluster", "cluster", "must not be empty nor contain a comma; got "+strconv.Quote(cluster))
			return
		}
		o.cluster = cluster
	})
}

// withWeight sets the weight a FormatNacos Registrar registers instances
// with (default 100). w must be a finite number > 0.
func withWeight(w float64) Option {
	return registrarOption("WithWeight", func(o *registrarOptions) {
		if !(w > 0) || math.IsInf(w, 1) {
			o.bad("WithWeight", "w", "must be a finite number > 0; got "+strconv.FormatFloat(w, 'g', -1, 64))
			return
		}
		o.weight = w
	})
}

// WithDrainDelay sets how long a Registrar's Deregister waits after the
// instance left the registry, before kratos stops the servers. Default
// 2 s; 0: no wait. d must be >= 0.
func WithDrainDelay(d time.Duration) Option {
	return registrarOption("WithDrainDelay", func(o *registrarOptions) {
		if d < 0 {
			o.bad("WithDrainDelay", "d", "must be >= 0; got "+d.String())
			return
		}
		o.drain = d
	})
}

// WithPolicy sets the backoff between a Registrar's first attempts to
// register an instance, until Register's ctx ends. Default: the zero
// rebound.Policy. p must be valid.
func WithPolicy(p rebound.Policy) Option {
	return registrarOption("WithPolicy", func(o *registrarOptions) {
		if _, err := rebound.NewRetrier(p); err != nil {
			o.errs = append(o.errs, &rebound.ArgumentError{Func: "reboundkratos.WithPolicy", Arg: "p", Reason: "breaks a Policy rule", Err: err})
			return
		}
		o.policy = p
	})
}
