package nacos

import (
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/logging"
)

// An Option configures a Registry. A nil Option is ignored.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

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

// A SharedOption configures both New and Register.
type SharedOption interface {
	Option
	RegisterOption
}

type loggerOption struct{ l *zap.Logger }

func (o loggerOption) apply(c *config)            { c.log = logging.Redacted(o.l) }
func (o loggerOption) applyRegister(c *regConfig) { c.log = logging.Redacted(o.l) }

// WithLogger sets the logger of a Registry or a Registration (default:
// none; nil means none). The Registry logs at Debug, and at Info the
// subscriptions it hands back after a reconnect; the Manager logs the
// retries. A Registration logs its repairs at Info, a stop at Error, each
// failed attempt at Debug. Credentials are scrubbed (logging.Redacted).
func WithLogger(l *zap.Logger) SharedOption { return loggerOption{l} }

// WithNamespace sets the namespace id the client was configured with, so
// that keys naming another namespace are rejected. Default: read from the
// client when it has a GetClientConfig method (the SDK's NamingClient
// does), "public" when that is empty; for other clients keys may name any
// namespace.
func WithNamespace(ns string) Option {
	return optionFunc(func(c *config) { c.namespace, c.nsSet = ns, true })
}

// WithPollInterval sets how often MonitorConnection polls the client's
// ServerHealthy while connected (up) and while not (down). Defaults:
// DefaultPollInterval and DefaultDownPollInterval. Both must be at least
// a millisecond (a shorter one would poll in a busy loop): New returns an
// *rebound.ArgumentError otherwise.
func WithPollInterval(up, down time.Duration) Option {
	return optionFunc(func(c *config) {
		if up < time.Millisecond {
			c.bad("WithPollInterval", "up", fmt.Sprintf("must be at least 1ms; got %v", up))
		}
		if down < time.Millisecond {
			c.bad("WithPollInterval", "down", fmt.Sprintf("must be at least 1ms; got %v", down))
		}
		c.poll, c.downPoll = up, down
	})
}

// WithEvidenceWindow sets how long, after a reconnect, the adapter waits
// for evidence that the server holds each subscription (see the package
// documentation): a subscription still without evidence once no
// subscription at all has shown any for window, or once total has passed
// since the reconnect, is handed back to the Manager (Sink.Resubscribe with
// ErrNoEvidence), which subscribes it again through its paced loop.
// Defaults: DefaultEvidenceWindow and DefaultEvidenceCap. Both must be
// positive and window must not exceed total; keep total below the
// Manager's subscriber.WithConfirmTimeout. New returns an
// *rebound.ArgumentError otherwise.
//
// Sizing: the SDK's redo re-sends one key after the other, so a client
// whose redo takes longer than total (many thousands of keys on one
// client, or a slow server) hands back keys the redo has not reached yet;
// raise total (and the Manager's WithConfirmTimeout) for such a client.
// While it waits, the adapter reads each waiting key's cache entry once
// per poll interval (an in-memory map read in the SDK).
func WithEvidenceWindow(window, total time.Duration) Option {
	return optionFunc(func(c *config) {
		switch {
		case window <= 0:
			c.bad("WithEvidenceWindow", "window", "must be positive")
		case total <= 0:
			c.bad("WithEvidenceWindow", "total", "must be positive")
		case window > total:
			c.bad("WithEvidenceWindow", "window", "must not exceed total")
		}
		c.window, c.cap = window, total
	})
}
