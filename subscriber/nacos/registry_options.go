package nacos

import (
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/logging"
)

// An Option configures New or Register. WithLogger configures both,
// WithPollInterval New only, the others Register only; each refuses the
// other's with an *rebound.ArgumentError. A nil Option is ignored.
type Option interface {
	apply(*config)
	applyRegister(*regConfig)
}

// newOption is an Option of New only.
type newOption struct {
	name string
	f    func(*config)
}

func (o newOption) apply(c *config) { o.f(c) }
func (o newOption) applyRegister(c *regConfig) {
	c.errs = append(c.errs, &rebound.ArgumentError{Func: "nacos.Register", Arg: "opts",
		Reason: "must not hold nacos." + o.name + ", which configures New only"})
}

// regOption is an Option of Register only.
type regOption struct {
	name string
	f    func(*regConfig)
}

func (o regOption) applyRegister(c *regConfig) { o.f(c) }
func (o regOption) apply(c *config) {
	c.errs = append(c.errs, &rebound.ArgumentError{Func: "nacos.New", Arg: "opts",
		Reason: "must not hold nacos." + o.name + ", which configures Register only"})
}

type config struct {
	log       *zap.Logger
	namespace string
	nsSet     bool
	poll      time.Duration
	downPoll  time.Duration
	window    time.Duration
	cap       time.Duration
	errs      []error
}

func (c *config) bad(fn, arg, reason string) {
	c.errs = append(c.errs, &rebound.ArgumentError{Func: "nacos." + fn, Arg: arg, Reason: reason})
}

type loggerOption struct{ l *zap.Logger }

func (o loggerOption) apply(c *config)            { c.log = logging.Redacted(o.l) }
func (o loggerOption) applyRegister(c *regConfig) { c.log = logging.Redacted(o.l) }

// WithLogger sets the logger of a Registry or a Registration; default and
// nil: none. Repairs are logged at Info, a stop at Error, the rest at
// Debug. Credentials are scrubbed (logging.Redacted).
func WithLogger(l *zap.Logger) Option { return loggerOption{l} }

// WithPollInterval sets how often MonitorConnection polls the client's
// ServerHealthy while connected (up) and not (down) (New only). Defaults:
// 100 ms and 1 s; both must be at least 1 ms.
func WithPollInterval(up, down time.Duration) Option {
	return newOption{"WithPollInterval", func(c *config) {
		if up < time.Millisecond {
			c.bad("WithPollInterval", "up", fmt.Sprintf("must be at least 1ms; got %v", up))
		}
		if down < time.Millisecond {
			c.bad("WithPollInterval", "down", fmt.Sprintf("must be at least 1ms; got %v", down))
		}
		c.poll, c.downPoll = up, down
	}}
}

// withEvidenceWindow sets how long after a reconnect the Registry waits
// for evidence that the server holds each subscription (New only): until
// no subscription has shown any for window, and at most total. The rest
// are handed back to the Manager (Sink.Resubscribe). Defaults: 2 s and 10 s;
// window must be positive and at most total. Sizing: docs/subscription.md.
func withEvidenceWindow(window, total time.Duration) Option {
	return newOption{"WithEvidenceWindow", func(c *config) {
		switch {
		case window <= 0:
			c.bad("WithEvidenceWindow", "window", "must be positive")
		case total <= 0:
			c.bad("WithEvidenceWindow", "total", "must be positive")
		case window > total:
			c.bad("WithEvidenceWindow", "window", "must not exceed total")
		}
		c.window, c.cap = window, total
	}}
}
