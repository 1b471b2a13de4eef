package reboundpg

import (
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/failback"
	"github.com/rebound-go/rebound/logging"
)

// An Option configures Open. A nil Option is ignored.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	table                  string
	lease, poll, retention time.Duration
	batch                  int
	quiet                  bool // WithNotify(false)
	codec                  failback.Codec
	log                    *zap.Logger
	errs                   []error
}

func (c *config) bad(fn, arg, reason string) {
	c.errs = append(c.errs, &rebound.ArgumentError{Func: fn, Arg: arg, Reason: reason})
}

func newConfig(fn string, opts []Option) (config, error) {
	c := config{table: "rebound_outbox", lease: 30 * time.Second, poll: time.Second, batch: 64,
		codec: failback.JSONCodec(nil), log: zap.NewNop()}
	for _, o := range opts {
		if o != nil {
			o.apply(&c)
		}
	}
	switch {
	case c.table == "" || len(c.table) > 63 || strings.ContainsRune(c.table, 0):
		c.bad(fn, "WithTable", fmt.Sprintf("(%q) must be 1 to 63 bytes with no NUL (a PostgreSQL identifier)", c.table))
	case c.lease < 10*time.Millisecond:
		c.bad(fn, "WithLease", fmt.Sprintf("(%v) must be at least 10ms", c.lease))
	case c.poll <= 0:
		c.bad(fn, "WithPollInterval", fmt.Sprintf("(%v) must be > 0", c.poll))
	case c.retention < 0:
		c.bad(fn, "WithRetention", fmt.Sprintf("(%v) must be >= 0", c.retention))
	case c.batch <= 0:
		c.bad(fn, "withBatch", fmt.Sprintf("(%d) must be > 0", c.batch))
	}
	if len(c.errs) > 0 {
		return c, c.errs[0]
	}
	return c, nil
}

// WithTable sets the queue's table (default "rebound_outbox"), in the
// search_path; NOTIFY uses a channel of that name. Any name of 1 to 63
// bytes is safe: it is always quoted as an identifier.
func WithTable(name string) Option { return optionFunc(func(c *config) { c.table = name }) }

// WithLease sets how long a claimed call stays with its Store without a
// renewal (default 30 s, at least 10 ms): a dead replica's calls move on
// after about one lease.
func WithLease(d time.Duration) Option { return optionFunc(func(c *config) { c.lease = d }) }

// withPollInterval sets the longest time between two claims when no NOTIFY
// arrives (default 1 s).
func withPollInterval(d time.Duration) Option { return optionFunc(func(c *config) { c.poll = d }) }

// withRetention keeps ended calls in the table, marked ended, for d
// (default 0: deleted at once).
func withRetention(d time.Duration) Option { return optionFunc(func(c *config) { c.retention = d }) }

// WithNotify sets whether Enqueue sends a NOTIFY (default true), which
// wakes the replicas at commit. NOTIFY serializes commits (docs/postgres.md);
// without it, new calls wait up to a second.
func WithNotify(on bool) Option { return optionFunc(func(c *config) { c.quiet = !on }) }

// withBatch caps the calls one claim takes (default 64; the Invoker's room
// bounds it too).
func withBatch(n int) Option { return optionFunc(func(c *config) { c.batch = n }) }

// WithCodec sets the Codec Enqueue encodes arguments with. It must be the
// Invoker's (failback.WithStore's codec). Default (and for nil): failback.JSONCodec(nil).
func WithCodec(codec failback.Codec) Option {
	return optionFunc(func(c *config) {
		if codec != nil {
			c.codec = codec
		}
	})
}

// WithLogger sets the logger (default: none; never zap's global one).
func WithLogger(l *zap.Logger) Option {
	return optionFunc(func(c *config) {
		if l != nil {
			c.log = logging.Redacted(l).With(zap.String("component", "reboundpg"))
		}
	})
}
