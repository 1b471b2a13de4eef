package failback

import (
	"context"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.uber.org/goleak"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/cluster"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// firstKey marks the caller's context, so that a provider can tell first
// attempts (caller's context) from retries (the invoker's own context).
type firstKey struct{}

func callerCtx() context.Context { return context.WithValue(context.Background(), firstKey{}, true) }

var errRefused = fmt.Errorf("dial tcp 10.0.0.7:20880: %w", syscall.ECONNREFUSED)

// call is one attempt seen by a provider.
type call struct {
	at    time.Duration // since the provider's start
	first bool          // made with the caller's context
	inv   *cluster.Invocation
	ctx   context.Context
}

// provider is a fake cluster.Invoker whose answer is computed by behave.
type provider struct {
	target string
	start  time.Time
	behave func(ctx context.Context, c call) (any, error)

	mu    sync.Mutex
	calls []call
}

func newProvider(target string, behave func(ctx context.Context, c call) (any, error)) *provider {
	return &provider{target: target, start: time.Now(), behave: behave}
}

func (p *provider) Target() string { return p.target }

func (p *provider) Invoke(ctx context.Context, inv *cluster.Invocation) (any, error) {
	c := call{at: time.Since(p.start), first: ctx.Value(firstKey{}) != nil, inv: inv, ctx: ctx}
	p.mu.Lock()
	p.calls = append(p.calls, c)
	p.mu.Unlock()
	if p.behave == nil {
		return "ok", nil
	}
	return p.behave(ctx, c)
}

func (p *provider) snapshot() []call {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]call(nil), p.calls...)
}

func (p *provider) retries() []call {
	var out []call
	for _, c := range p.snapshot() {
		if !c.first {
			out = append(out, c)
		}
	}
	return out
}

func alwaysFail(err error) func(context.Context, call) (any, error) {
	return func(context.Context, call) (any, error) { return nil, err }
}

// downUntil fails with errRefused before d, then succeeds.
func downUntil(d time.Duration) func(context.Context, call) (any, error) {
	return func(_ context.Context, c call) (any, error) {
		if c.at < d {
			return nil, errRefused
		}
		return "ok", nil
	}
}

// mutableDir is a Directory whose list can be replaced between attempts.
type mutableDir struct {
	mu  sync.Mutex
	ivs []cluster.Invoker
}

func (d *mutableDir) set(ivs ...cluster.Invoker) {
	d.mu.Lock()
	d.ivs = ivs
	d.mu.Unlock()
}

func (d *mutableDir) List(context.Context, *cluster.Invocation) ([]cluster.Invoker, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.ivs) == 0 {
		return nil, cluster.ErrNoInvokers
	}
	return d.ivs, nil
}

func mustNew(t testing.TB, dir cluster.Directory, opts ...Option) *Invoker {
	t.Helper()
	f, err := New(dir, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return f
}

func mustClose(t testing.TB, f *Invoker) {
	t.Helper()
	if err := f.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

// minDelay is rebound's floor of every delay.
const minDelay = 500 * time.Microsecond

// retries is the default policy with n retries (n+1 attempts).
func retries(n int) Option { return WithPolicy(DefaultPolicy(), rebound.WithMaxAttempts(n+1)) }

// checkStats asserts that the counters add up.
func checkStats(t testing.TB, s Stats) {
	t.Helper()
	sum := uint64(s.Queued) + uint64(s.InFlight) + s.Succeeded + s.GaveUp
	for _, n := range s.Dropped {
		sum += n
	}
	if sum != s.Offered || len(s.Dropped) != len(dropReasons) {
		t.Fatalf("stats do not add up: %+v (Queued+InFlight+Succeeded+GaveUp+Dropped = %d, Offered %d)", s, sum, s.Offered)
	}
}

// recorder collects hook calls.
type recorder struct {
	mu      sync.Mutex
	events  []string // "kind method"
	tasks   map[string][]Task
	dropped map[error]int
}

func newRecorder() *recorder {
	return &recorder{tasks: map[string][]Task{}, dropped: map[error]int{}}
}

func (r *recorder) add(kind string, tk Task) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, kind+" "+tk.Invocation.Method)
	r.tasks[kind] = append(r.tasks[kind], tk)
}

func (r *recorder) hooks() testHooks {
	return testHooks{
		Queued:    func(tk Task) { r.add("queued", tk) },
		Retried:   func(tk Task) { r.add("retried", tk) },
		Succeeded: func(tk Task) { r.add("succeeded", tk) },
		GaveUp:    func(tk Task) { r.add("gaveup", tk) },
		Dropped: func(tk Task) {
			r.add("dropped", tk)
			r.mu.Lock()
			r.dropped[tk.Reason]++
			r.mu.Unlock()
		},
	}
}

func (r *recorder) count(kind string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.tasks[kind])
}

func (r *recorder) get(kind string) []Task {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Task(nil), r.tasks[kind]...)
}

// testHooks is an observer with one function per kind of the invoker's
// events, each given the event's Task.
type testHooks struct {
	Queued, Retried, Succeeded, GaveUp, Dropped func(Task)
}

func (h testHooks) Observe(e rebound.Event) {
	t, ok := e.Detail.(Task)
	if !ok {
		return
	}
	var fn func(Task)
	switch e.Kind {
	case rebound.EventQueued:
		fn = h.Queued
	case rebound.EventRetry:
		fn = h.Retried
	case rebound.EventRecovered:
		fn = h.Succeeded
	case rebound.EventGiveUp:
		fn = h.GaveUp
	case rebound.EventDropped:
		fn = h.Dropped
	}
	if fn != nil {
		fn(t)
	}
}

// withSeed makes the jitter draws reproducible: the n-th task gets a
// Schedule seeded from seed and n.
func withSeed(seed uint64) Option {
	return optionFunc(func(c *config) { c.seed, c.seeded = seed, true })
}

// withTargetConcurrency sets the bound of retries running at once on one
// target (by default half the workers).
func withTargetConcurrency(n int) Option {
	return optionFunc(func(c *config) { c.perTarget = n })
}

// label is the metrics label of a drop reason.
func label(reason error) string { return string(dropLabel(reason)) }

// sumDropped adds up the calls dropped for every reason.
func sumDropped(s Stats) (n uint64) {
	for _, v := range s.Dropped {
		n += v
	}
	return n
}

// withEngine adds engine options beside WithPolicy's, as if given to it
// (tests that set the policy and the observers apart).
func withEngine(opts ...rebound.Option) Option {
	return optionFunc(func(c *config) { c.testOpts = append(c.testOpts, opts...) })
}

func withObserver(o rebound.Observer) Option          { return withEngine(rebound.WithObserver(o)) }
func withBudget(b *rebound.RetryBudget) Option        { return withEngine(rebound.WithBudget(b)) }
func withThrottle(t *rebound.AdaptiveThrottle) Option { return withEngine(rebound.WithThrottle(t)) }
func withMeterProvider(mp metric.MeterProvider) Option {
	return withEngine(rebound.WithMeterProvider(mp))
}
