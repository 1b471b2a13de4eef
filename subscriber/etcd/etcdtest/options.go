package etcdtest

import (
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/internal/sat"
)

// Defaults of a [Cluster].
const (
	// DefaultTick and DefaultElection are etcd's own defaults (heartbeat
	// 100 ms, election timeout 1 s).
	DefaultTick     = 100 * time.Millisecond
	DefaultElection = 1000 * time.Millisecond
	// DefaultStartTimeout bounds NewCluster's wait for the members to be
	// ready and elect a leader.
	DefaultStartTimeout = 30 * time.Second
)

// An Option configures a [Cluster] created by [NewCluster]. A nil Option
// is ignored; a bad value makes NewCluster return a
// *rebound.ArgumentError naming the option and the rule.
type Option interface {
	apply(*options) error
}

type optionFunc func(*options) error

func (f optionFunc) apply(o *options) error { return f(o) }

type options struct {
	dir          string
	log          *zap.Logger
	hook         func(Request)
	tick         time.Duration
	election     time.Duration
	startTimeout time.Duration
}

func defaultOptions() options {
	return options{
		log:          zap.NewNop(),
		tick:         DefaultTick,
		election:     DefaultElection,
		startTimeout: DefaultStartTimeout,
	}
}

// WithDir sets the directory the members keep their data in (one
// subdirectory each), for example t.TempDir(). The directory must exist;
// the Cluster leaves it in place. Default: a new temporary directory,
// removed by [Cluster.Close].
func WithDir(dir string) Option {
	return optionFunc(func(o *options) error {
		if dir == "" {
			return argErr("WithDir", "dir", "must not be empty")
		}
		o.dir = dir
		return nil
	})
}

// WithLogger sets the logger of the embedded members (each one named
// after its member, "m0", "m1", ...). Default: zap.NewNop(); nil also
// means no-op. etcd logs a lot at Info: pass a logger at Warn or above.
func WithLogger(l *zap.Logger) Option {
	return optionFunc(func(o *options) error {
		if l == nil {
			l = zap.NewNop()
		}
		o.log = l
		return nil
	})
}

// WithRequestHook installs a function called for every request a member
// receives (see [Request]), before the member handles it. It is called
// from the members' gRPC goroutines, concurrently and without locks held:
// it must be safe for concurrent use and return quickly. nil means none
// (the default). [Cluster.Stats] counts the same requests.
func WithRequestHook(hook func(Request)) Option {
	return optionFunc(func(o *options) error {
		o.hook = hook
		return nil
	})
}

// WithElection sets the raft heartbeat interval and election timeout of
// every member (etcd's --heartbeat-interval and --election-timeout).
// Defaults: DefaultTick and DefaultElection. tick must be at least 1 ms
// and election from 5 ticks to 50 s (etcd's own rules).
func WithElection(tick, election time.Duration) Option {
	return optionFunc(func(o *options) error {
		if tick < time.Millisecond {
			return argErr("WithElection", "tick", fmt.Sprintf("must be >= 1ms; got %v", tick))
		}
		if five := sat.Mul(tick, 5); election < five || election > maxElection {
			return argErr("WithElection", "election", fmt.Sprintf("must be from 5 ticks (%v) to %v; got %v", five, maxElection, election))
		}
		o.tick, o.election = tick, election
		return nil
	})
}

// WithStartTimeout bounds how long NewCluster waits for the members to be
// ready and to elect a leader. Default: DefaultStartTimeout. d must be
// positive.
func WithStartTimeout(d time.Duration) Option {
	return optionFunc(func(o *options) error {
		if d <= 0 {
			return argErr("WithStartTimeout", "d", fmt.Sprintf("must be > 0; got %v", d))
		}
		o.startTimeout = d
		return nil
	})
}

// maxElection is etcd's longest election timeout.
const maxElection = 50 * time.Second

func argErr(fn, arg, reason string) error {
	return &rebound.ArgumentError{Func: "etcdtest." + fn, Arg: arg, Reason: reason}
}
