package cluster

import (
	"go.uber.org/zap"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/logging"
)

// An Option configures NewRegistryDirectory or NewBreakerDirectory. An
// option of the other constructor is an error. A nil Option is ignored.
type Option interface {
	apply(*config)
}

// config is what the options of one constructor set.
type config struct {
	breaker bool // NewBreakerDirectory's options; false: NewRegistryDirectory's
	dir     *dirConfig
	br      *breakerConfig
	errs    []error
}

// option is an Option for one constructor, or both.
type option struct {
	name string
	dir  func(*dirConfig)
	br   func(*breakerConfig)
}

func (o option) apply(c *config) {
	switch {
	case c.breaker && o.br != nil:
		o.br(c.br)
	case !c.breaker && o.dir != nil:
		o.dir(c.dir)
	default:
		fn := "cluster.NewRegistryDirectory"
		if c.breaker {
			fn = "cluster.NewBreakerDirectory"
		}
		c.errs = append(c.errs, &rebound.ArgumentError{Func: fn, Arg: "opts", Reason: "cluster." + o.name + " does not apply to it"})
	}
}

func dirOption(name string, f func(*dirConfig)) Option         { return option{name: name, dir: f} }
func breakerOption(name string, f func(*breakerConfig)) Option { return option{name: name, br: f} }

// applyOptions applies opts to c and returns their errors.
func applyOptions(c *config, opts []Option) []error {
	for _, o := range opts {
		if o != nil {
			o.apply(c)
		}
	}
	return c.errs
}

// WithLogger sets the logger of either directory, with credentials
// scrubbed. Default: none. Failed dials and closes log at Warn, breaker
// state changes at Info.
func WithLogger(l *zap.Logger) Option {
	if l == nil {
		return nil
	}
	l = logging.Redacted(l)
	return option{name: "WithLogger",
		dir: func(c *dirConfig) { c.logger = l },
		br:  func(c *breakerConfig) { c.logger = l }}
}
