package reboundkratos

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/logging"
	"github.com/rebound-go/rebound/subscriber"
)

// Defaults.
const (
	// defaultMaxPending is how many lists a watcher keeps for a Next that
	// has not been called yet (see WithMaxPending).
	defaultMaxPending = 1024
	// DefaultDrainDelay is how long Deregister waits after deregistering,
	// so that consumers can see the instance leave before kratos stops
	// its servers (see WithDrainDelay).
	DefaultDrainDelay = 2 * time.Second
	// DefaultGroup is the Nacos group of FormatNacos without WithGroup
	// (the contrib registry's default).
	DefaultGroup = "DEFAULT_GROUP"
	// DefaultCluster is the Nacos cluster FormatNacos registers in
	// without WithCluster (the contrib registry's default).
	DefaultCluster = "DEFAULT"
)

// A DiscoveryOption configures NewDiscovery.
type DiscoveryOption interface{ applyDiscovery(*discoveryOptions) }

// A RegistrarOption configures NewRegistrar.
type RegistrarOption interface{ applyRegistrar(*registrarOptions) }

// A SharedOption configures both NewDiscovery and NewRegistrar.
type SharedOption interface {
	DiscoveryOption
	RegistrarOption
}

type common struct {
	group, namespace string
	log              *zap.Logger
	errs             []error
}

func (c *common) bad(fn, arg, reason string) {
	c.errs = append(c.errs, &rebound.ArgumentError{Func: "reboundkratos." + fn, Arg: arg, Reason: reason})
}

type discoveryOptions struct {
	common
	clusters   []string
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

type sharedOption func(*common)

func (f sharedOption) applyDiscovery(o *discoveryOptions) { f(&o.common) }
func (f sharedOption) applyRegistrar(o *registrarOptions) { f(&o.common) }

type discoveryOption func(*discoveryOptions)

func (f discoveryOption) applyDiscovery(o *discoveryOptions) { f(o) }

type registrarOption func(*registrarOptions)

func (f registrarOption) applyRegistrar(o *registrarOptions) { f(o) }

// WithGroup sets the Nacos group of FormatNacos (default DefaultGroup,
// like the contrib registry's WithGroup). FormatEtcd has no group: a
// group other than "" is an error there.
func WithGroup(group string) SharedOption {
	return sharedOption(func(c *common) {
		if strings.Contains(group, "@@") || strings.TrimSpace(group) != group {
			c.bad("WithGroup", "group", `must not contain "@@" nor surrounding white space; got `+strconv.Quote(group))
			return
		}
		c.group = group
	})
}

// WithNamespace sets the subscriber.Key Namespace of FormatNacos (""
// means the Nacos client's namespace). FormatEtcd has no namespace.
func WithNamespace(ns string) SharedOption {
	return sharedOption(func(c *common) { c.namespace = ns })
}

// WithLogger sets the logger (default: none). Credentials are scrubbed
// (logging.Redacted), endpoints' passwords included.
func WithLogger(l *zap.Logger) SharedOption {
	return sharedOption(func(c *common) { c.log = logging.Redacted(l) })
}

// WithClusters restricts a FormatNacos Discovery to instances of these
// Nacos clusters (default: all, as the contrib registry reads them).
func WithClusters(clusters ...string) DiscoveryOption {
	return discoveryOption(func(o *discoveryOptions) {
		for i, c := range clusters {
			if strings.TrimSpace(c) == "" || strings.Contains(c, ",") {
				o.bad("WithClusters", fmt.Sprintf("clusters[%d]", i), "must not be empty nor contain a comma; got "+strconv.Quote(c))
				return
			}
		}
		o.clusters = append([]string(nil), clusters...)
	})
}

// WithKind sets the scheme a FormatNacos Discovery gives instances whose
// metadata has no "kind" (default DefaultKind, "grpc", as the contrib
// registry's WithDefaultKind).
func WithKind(kind string) DiscoveryOption {
	return discoveryOption(func(o *discoveryOptions) {
		if !knownSchemes[kind] {
			o.bad("WithKind", "kind", "must be grpc, grpcs, http or https; got "+strconv.Quote(kind))
			return
		}
		o.kind = kind
	})
}

// WithMaxPending sets how many lists a watcher keeps for Next (default
// DefaultMaxPending). A watcher whose Next is not called while more
// changes than that arrive loses the oldest ones (it still sees the
// latest list and every later change, in order). n must be >= 1.
func WithMaxPending(n int) DiscoveryOption {
	return discoveryOption(func(o *discoveryOptions) {
		if n < 1 {
			o.bad("WithMaxPending", "n", "must be >= 1; got "+strconv.Itoa(n))
			return
		}
		o.maxPending = n
	})
}

// WithKeyFunc replaces the mapping from a kratos service name to the
// subscriber.Key the Discovery reads. By default a name maps to
// Key{Namespace, Group, Service: name, Clusters} (FormatNacos) or
// Key{Service: name} (FormatEtcd). fn runs with no lock held, for each
// Watch and each GetService of a name not held yet; its error or panic is
// returned by them. A nil fn is an error.
func WithKeyFunc(fn func(name string) (subscriber.Key, error)) DiscoveryOption {
	return discoveryOption(func(o *discoveryOptions) {
		if fn == nil {
			o.bad("WithKeyFunc", "fn", "is nil")
			return
		}
		o.keyFunc = fn
	})
}

// WithCluster sets the Nacos cluster FormatNacos registers instances in
// (default DefaultCluster).
func WithCluster(cluster string) RegistrarOption {
	return registrarOption(func(o *registrarOptions) {
		if strings.TrimSpace(cluster) == "" || strings.Contains(cluster, ",") {
			o.bad("WithCluster", "cluster", "must not be empty nor contain a comma; got "+strconv.Quote(cluster))
			return
		}
		o.cluster = cluster
	})
}

// WithWeight sets the weight FormatNacos registers instances with
// (default DefaultNacosWeight). w must be a finite number > 0.
func WithWeight(w float64) RegistrarOption {
	return registrarOption(func(o *registrarOptions) {
		if !(w > 0) || math.IsInf(w, 1) {
			o.bad("WithWeight", "w", "must be a finite number > 0; got "+strconv.FormatFloat(w, 'g', -1, 64))
			return
		}
		o.weight = w
	})
}

// WithDrainDelay sets how long Deregister waits after the instance left
// the registry before it returns (default DefaultDrainDelay; 0: no
// wait). kratos.App.Stop stops the servers when Deregister returns, so
// this is the time consumers have to see the change while the instance
// still serves. d must be >= 0.
func WithDrainDelay(d time.Duration) RegistrarOption {
	return registrarOption(func(o *registrarOptions) {
		if d < 0 {
			o.bad("WithDrainDelay", "d", "must be >= 0; got "+d.String())
			return
		}
		o.drain = d
	})
}

// WithPolicy sets the backoff between the attempts of Register's first
// registration of each part (default: the zero rebound.Policy, 1 s
// doubling to 30 s, full jitter). Register retries an adapter error that
// is not a bad argument or "closed" until ctx ends (kratos.App.Run's
// ctx: kratos.RegistrarTimeout, default 10 s). p must be valid
// (rebound.Policy.Validate).
func WithPolicy(p rebound.Policy) RegistrarOption {
	return registrarOption(func(o *registrarOptions) {
		if err := p.Validate(); err != nil {
			o.errs = append(o.errs, &rebound.ArgumentError{Func: "reboundkratos.WithPolicy", Arg: "p", Reason: "breaks a Policy rule", Err: err})
			return
		}
		o.policy = p
	})
}
