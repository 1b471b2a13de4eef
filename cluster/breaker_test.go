package cluster

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sony/gobreaker/v2"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/internal/telemetry/telemetrytest"
)

// flaky is an Invoker that fails with err while failing is set.
type flaky struct {
	target  string
	failing atomic.Bool
	err     error
	calls   atomic.Int64
	block   chan struct{} // if set, Invoke waits for it
}

func (f *flaky) Target() string { return f.target }
func (f *flaky) Invoke(ctx context.Context, _ *Invocation) (any, error) {
	f.calls.Add(1)
	if f.block != nil {
		select {
		case <-f.block:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if f.failing.Load() {
		return nil, f.err
	}
	return nil, nil
}

var errDown = rebound.Transient(errors.New("UNAVAILABLE"))

func providers(n int) []*flaky {
	out := make([]*flaky, n)
	for i := range out {
		out[i] = &flaky{target: string(rune('a' + i)), err: errDown}
	}
	return out
}

func static(ps []*flaky) Directory {
	ivs := make([]Invoker, len(ps))
	for i, p := range ps {
		ivs[i] = p
	}
	return NewStaticDirectory(ivs...)
}

// mutableDir is a Directory whose list a test replaces.
type mutableDir struct{ list atomic.Pointer[[]Invoker] }

func (d *mutableDir) set(ivs ...Invoker) { d.list.Store(&ivs) }
func (d *mutableDir) List(context.Context, *Invocation) ([]Invoker, error) {
	l := d.list.Load()
	if l == nil || len(*l) == 0 {
		return nil, ErrNoInvokers
	}
	return *l, nil
}

func listed(t *testing.T, d Directory) []string {
	t.Helper()
	ivs, err := d.List(context.Background(), &Invocation{})
	if err != nil {
		return nil
	}
	return targets(ivs)
}

// callTarget invokes the listed invoker of target n times.
func callTarget(t *testing.T, d Directory, target string, n int) (errs []error) {
	t.Helper()
	for range n {
		ivs, err := d.List(context.Background(), &Invocation{})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		found := false
		for _, iv := range ivs {
			if iv.Target() == target {
				found = true
				_, err := iv.Invoke(context.Background(), &Invocation{})
				errs = append(errs, err)
			}
		}
		if !found {
			errs = append(errs, errors.New("not listed"))
		}
	}
	return errs
}

func TestNewBreakerDirectoryBadInput(t *testing.T) {
	dir := NewStaticDirectory(invokers("a")...)
	cases := []struct {
		name string
		dir  Directory
		opt  Option
		want string
	}{
		{"nil dir", nil, nil, "cluster.NewBreakerDirectory: dir must not be nil"},
		{"nil factory", dir, WithBreakerSettings(nil), "cluster.WithBreakerSettings: factory must not be nil"},
		{"a limit", dir, WithBreakerSettings(defaultSettings, rebound.WithMaxAttempts(2)), "cluster.WithBreakerSettings: opts may hold only rebound.WithObserver and rebound.WithMeterProvider"},
		{"share 0", dir, WithMaxEjected(0), "cluster.WithMaxEjected: share must be in (0, 1], got 0"},
		{"share negative", dir, WithMaxEjected(-0.5), "cluster.WithMaxEjected: share must be in (0, 1]"},
		{"share above 1", dir, WithMaxEjected(1.5), "cluster.WithMaxEjected: share must be in (0, 1], got 1.5"},
		{"share NaN", dir, WithMaxEjected(nanValue()), "cluster.WithMaxEjected: share must be in (0, 1], got NaN"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, err := NewBreakerDirectory(c.dir, c.opt)
			if d != nil || !errors.Is(err, rebound.ErrInvalidArgument) {
				t.Fatalf("got (%v, %v), want a *rebound.ArgumentError", d, err)
			}
			if _, ok := errors.AsType[*rebound.ArgumentError](err); !ok {
				t.Errorf("%v is not a *rebound.ArgumentError", err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q does not say %q", err, c.want)
			}
		})
	}
}

func nanValue() float64 { z := 0.0; return z / z }

// An open breaker takes its target out of selection; a probe after the
// open timeout closes it again; the events arrive in order.
func TestBreakerEjectsAndRecovers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ps := providers(3)
		ps[1].failing.Store(true)
		var mu sync.Mutex
		var events []string
		d, err := NewBreakerDirectory(static(ps), WithOpenTimeout(10*time.Second),
			WithBreakerSettings(defaultSettings, rebound.WithObserver(rebound.ObserverFunc(func(ev rebound.Event) {
				e, ok := ev.Detail.(BreakerEvent)
				if !ok {
					return
				}
				mu.Lock()
				events = append(events, e.Target+":"+e.From.String()+">"+e.To.String())
				mu.Unlock()
			}))))
		if err != nil {
			t.Fatal(err)
		}
		errs := callTarget(t, d, "b", defaultConsecutiveFailures)
		for _, e := range errs {
			if !errors.Is(e, errDown) {
				t.Fatalf("call to b: %v, want the provider's error", e)
			}
		}
		if got := strings.Join(listed(t, d), ","); got != "a,c" {
			t.Fatalf("after %d failures listed %q, want a,c", defaultConsecutiveFailures, got)
		}
		open := d.Open()
		if len(open) != 1 || open[0].Target != "b" || open[0].State != gobreaker.StateOpen || !open[0].Ejected ||
			!open[0].Until.Equal(open[0].Since.Add(10*time.Second)) {
			t.Fatalf("Open() = %+v, want b open until since+10s", open)
		}
		time.Sleep(10*time.Second + time.Millisecond)
		if got := strings.Join(listed(t, d), ","); got != "a,b,c" {
			t.Fatalf("after the open timeout listed %q, want a,b,c (half-open)", got)
		}
		ps[1].failing.Store(false)
		before := ps[1].calls.Load()
		if errs := callTarget(t, d, "b", 1); errs[0] != nil {
			t.Fatalf("probe: %v", errs[0])
		}
		if n := ps[1].calls.Load() - before; n != 1 {
			t.Errorf("probe reached b %d times, want 1", n)
		}
		if len(d.Open()) != 0 {
			t.Errorf("after a good probe Open() = %+v, want none", d.Open())
		}
		mu.Lock()
		defer mu.Unlock()
		want := "b:closed>open b:open>half-open b:half-open>closed"
		if got := strings.Join(events, " "); got != want {
			t.Errorf("events %q, want %q", got, want)
		}
	})
}

// Half-open: a recovering target gets one call, not a burst: while the
// probe runs, List leaves the target out and a racing call is refused.
func TestBreakerHalfOpenOneProbe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ps := providers(3)
		ps[0].failing.Store(true)
		d, _ := NewBreakerDirectory(static(ps), WithOpenTimeout(time.Second), WithConsecutiveFailures(1))
		callTarget(t, d, "a", 1)
		time.Sleep(2 * time.Second)
		ivs, _ := d.List(context.Background(), &Invocation{})
		if targets(ivs)[0] != "a" {
			t.Fatalf("half-open a not listed: %v", targets(ivs))
		}
		stale := ivs[0] // a racing caller that listed before the probe started
		ps[0].block = make(chan struct{})
		ps[0].failing.Store(false)
		done := make(chan error)
		go func() { _, err := ivs[0].Invoke(context.Background(), &Invocation{}); done <- err }()
		synctest.Wait() // the probe is in flight
		if got := strings.Join(listed(t, d), ","); got != "b,c" {
			t.Errorf("during the probe listed %q, want b,c", got)
		}
		_, err := stale.Invoke(context.Background(), &Invocation{})
		var boe *BreakerOpenError
		if !errors.As(err, &boe) || boe.Target != "a" || !errors.Is(err, gobreaker.ErrTooManyRequests) || !errors.Is(err, ErrNoInvokers) {
			t.Errorf("racing call: %v, want a *BreakerOpenError for a wrapping ErrTooManyRequests", err)
		}
		close(ps[0].block)
		if err := <-done; err != nil {
			t.Fatalf("probe: %v", err)
		}
		if n := ps[0].calls.Load(); n != 2 {
			t.Errorf("a reached %d times (1 failure + 1 probe), want 2", n)
		}
		if got := strings.Join(listed(t, d), ","); got != "a,b,c" {
			t.Errorf("after the probe listed %q, want a,b,c", got)
		}
	})
}

// Never more than the share out at once: with every provider failing, one
// of three (floor(0.5*3)) is ejected and the others are still called.
func TestBreakerMaxEjected(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ps := providers(3)
		for _, p := range ps {
			p.failing.Store(true)
		}
		d, _ := NewBreakerDirectory(static(ps), WithConsecutiveFailures(2))
		for range 20 {
			ivs, err := d.List(context.Background(), &Invocation{})
			if err != nil {
				t.Fatal(err)
			}
			if len(ivs) < 2 {
				t.Fatalf("listed %v: more than the share ejected", targets(ivs))
			}
			for _, iv := range ivs {
				if _, err := iv.Invoke(context.Background(), &Invocation{}); !errors.Is(err, errDown) {
					t.Fatalf("call to %s: %v, want the provider's own error (not a refusal)", iv.Target(), err)
				}
			}
			time.Sleep(time.Millisecond)
		}
		if got := len(d.Open()); got != 3 {
			t.Errorf("%d breakers open, want 3 (all failing)", got)
		}
		ejected := 0
		for _, s := range d.breakers() {
			if s.Ejected {
				ejected++
			}
		}
		if ejected != 1 {
			t.Errorf("%d ejected, want 1", ejected)
		}
		// Share 1: all may go, and List says until when.
		d1, _ := NewBreakerDirectory(static(ps), WithConsecutiveFailures(1), WithMaxEjected(1), WithOpenTimeout(5*time.Second))
		for _, p := range ps {
			callTarget(t, d1, p.target, 1)
		}
		_, err := d1.List(context.Background(), &Invocation{})
		var boe *BreakerOpenError
		if !errors.As(err, &boe) || !errors.Is(err, ErrNoInvokers) || time.Until(boe.Until) <= 0 || time.Until(boe.Until) > 5*time.Second+time.Millisecond {
			t.Errorf("all open, share 1: List err %v, want a *BreakerOpenError until about 5s from now", err)
		}
	})
}

// A business error is not the provider being down.
func TestBreakerBusinessErrorIsSuccess(t *testing.T) {
	ps := providers(1)
	ps[0].err = errors.New("no such order")
	ps[0].failing.Store(true)
	d, _ := NewBreakerDirectory(static(ps), WithConsecutiveFailures(1), WithMaxEjected(1))
	callTarget(t, d, "a", 10)
	if len(d.Open()) != 0 {
		t.Errorf("business errors opened the breaker: %+v", d.Open())
	}
	// A custom classifier decides otherwise.
	d2, _ := NewBreakerDirectory(static(ps), WithConsecutiveFailures(1), WithMaxEjected(1),
		WithBreakerClassifier(func(err error) bool { return err != nil }))
	callTarget(t, d2, "a", 1)
	if len(d2.Open()) != 1 {
		t.Errorf("classifier counting every error: Open() = %+v, want a", d2.Open())
	}
}

// A target that leaves the list drops its breaker; back, it starts closed.
func TestBreakerTargetLeavesAndComesBack(t *testing.T) {
	ps := providers(3)
	ps[2].failing.Store(true)
	dir := &mutableDir{}
	dir.set(ps[0], ps[1], ps[2])
	d, _ := NewBreakerDirectory(dir, WithConsecutiveFailures(1))
	callTarget(t, d, "c", 1)
	if got := strings.Join(listed(t, d), ","); got != "a,b" {
		t.Fatalf("listed %q, want a,b", got)
	}
	dir.set(ps[0], ps[1])
	if got := strings.Join(listed(t, d), ","); got != "a,b" || len(d.breakers()) != 2 {
		t.Fatalf("c gone: listed %q with %d breakers, want a,b and 2", got, len(d.breakers()))
	}
	dir.set(ps[0], ps[1], ps[2])
	if got := strings.Join(listed(t, d), ","); got != "a,b,c" || len(d.Open()) != 0 {
		t.Fatalf("c back: listed %q, open %+v; want a,b,c all closed", got, d.Open())
	}
	// A target whose invoker is replaced (same Target) keeps its breaker.
	callTarget(t, d, "c", 1)
	c2 := &flaky{target: "c", err: errDown}
	dir.set(ps[0], ps[1], c2)
	if got := strings.Join(listed(t, d), ","); got != "a,b" {
		t.Errorf("c re-dialled: listed %q, want a,b (its breaker still open)", got)
	}
}

// Hooks run after gobreaker's mutex is released: a hook that reads the
// breakers (which takes that mutex) does not deadlock; the Settings'
// OnStateChange is called the same way; a panicking hook is survived.
func TestBreakerHooksNotUnderGobreakerMutex(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ps := providers(2)
		ps[0].failing.Store(true)
		var d *BreakerDirectory
		var seen, user atomic.Int32
		d, _ = NewBreakerDirectory(static(ps), WithConsecutiveFailures(1),
			WithBreakerSettings(func(string) gobreaker.Settings {
				return gobreaker.Settings{OnStateChange: func(string, gobreaker.State, gobreaker.State) {
					d.breakers()
					user.Add(1)
					panic("user hook")
				}}
			},
				rebound.WithObserver(rebound.ObserverFunc(func(rebound.Event) {
					d.breakers() // takes every breaker's mutex
					seen.Add(1)
				}))))
		callTarget(t, d, "a", 1)
		if seen.Load() != 1 || user.Load() != 1 {
			t.Errorf("hooks called %d and %d times, want 1 and 1", seen.Load(), user.Load())
		}
	})
}

// The success path allocates nothing: List from the kept answer, Select,
// and a call through the breaker.
func TestBreakerSuccessPathNoAlloc(t *testing.T) {
	d, _ := NewBreakerDirectory(static(providers(3)))
	lb := Random()
	ctx, inv := context.Background(), &Invocation{}
	allocs := testing.AllocsPerRun(1000, func() {
		ivs, _ := d.List(ctx, inv)
		iv, _ := lb.Select(ivs, inv, nil)
		_, _ = iv.Invoke(ctx, inv)
	})
	if allocs != 0 {
		t.Errorf("%v allocations per call, want 0", allocs)
	}
}

// BenchmarkBreakerAllow is the breaker check of one call: List's answer
// kept (the inner List plus atomic loads).
func BenchmarkBreakerAllow(b *testing.B) {
	d, _ := NewBreakerDirectory(static(providers(3)))
	ctx, inv := context.Background(), &Invocation{}
	b.ReportAllocs()
	for b.Loop() {
		_, _ = d.List(ctx, inv)
	}
}

// BenchmarkBreakerInvoke is one call through a breaker against a direct
// call and against gobreaker's Execute, in the same run.
func BenchmarkBreakerInvoke(b *testing.B) {
	ps := providers(1)
	ctx, inv := context.Background(), &Invocation{}
	b.Run("direct", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = ps[0].Invoke(ctx, inv)
		}
	})
	b.Run("gobreaker", func(b *testing.B) { // the per-call cost before the closed state's lock-free path
		cb := gobreaker.NewCircuitBreaker[any](gobreaker.Settings{})
		b.ReportAllocs()
		for b.Loop() {
			_, _ = cb.Execute(func() (any, error) { return ps[0].Invoke(ctx, inv) })
		}
	})
	b.Run("breaker", func(b *testing.B) {
		d, _ := NewBreakerDirectory(static(ps))
		ivs, _ := d.List(ctx, inv)
		b.ReportAllocs()
		for b.Loop() {
			_, _ = ivs[0].Invoke(ctx, inv)
		}
	})
}

// The metrics: breakers per state and transitions, read when collected;
// Close unregisters them.
func TestBreakerMetrics(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	ps := providers(3)
	ps[0].failing.Store(true)
	d, err := NewBreakerDirectory(static(ps), WithConsecutiveFailures(1), WithBreakerSettings(defaultSettings, rebound.WithMeterProvider(mp)))
	if err != nil {
		t.Fatal(err)
	}
	callTarget(t, d, "a", 1)
	got := telemetrytest.Collect(t, reader)
	if s := got["rebound.breaker.targets"]; s["state=open"] != 1 || s["state=closed"] != 2 || s["state=half_open"] != 0 {
		t.Errorf("targets by state %v, want 1 open, 2 closed", s)
	}
	if s := got["rebound.breaker.transitions"]; s["state=open"] != 1 || s["state=closed"] != 0 {
		t.Errorf("transitions %v, want 1 into open", s)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if got := telemetrytest.Collect(t, reader); len(got["rebound.breaker.targets"]) != 0 {
		t.Errorf("still reported after Close: %v", got)
	}
}

// Concurrent calls while providers flap and the list changes: no race, and
// the per-state counts match the breakers listed.
func TestBreakerConcurrent(t *testing.T) {
	ps := providers(4)
	dir := &mutableDir{}
	dir.set(ps[0], ps[1], ps[2], ps[3])
	d, _ := NewBreakerDirectory(dir, WithConsecutiveFailures(2), WithOpenTimeout(time.Millisecond))
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				ivs, err := d.List(context.Background(), &Invocation{})
				if err != nil {
					continue
				}
				for _, iv := range ivs {
					_, _ = iv.Invoke(context.Background(), &Invocation{})
				}
			}
		})
	}
	for i := range 200 {
		ps[i%4].failing.Store(i%3 == 0)
		if i%10 == 0 {
			dir.set(ps[0], ps[1], ps[2])
		} else {
			dir.set(ps[0], ps[1], ps[2], ps[3])
		}
		_ = d.breakers()
		time.Sleep(100 * time.Microsecond)
	}
	close(stop)
	wg.Wait()
	listed(t, d) // settle the members on the last list
	c := d.counts()
	var n int64
	for _, v := range c.States {
		if v < 0 {
			t.Errorf("negative state count: %+v", c)
		}
		n += v
	}
	if n != int64(len(d.breakers())) {
		t.Errorf("state counts %+v add up to %d, %d breakers listed", c.States, n, len(d.breakers()))
	}
}

func TestDefaultFailure(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{errors.New("no such order"), false},
		{rebound.Permanent(errDown), false},
		{context.Canceled, false},
		{errDown, true},
		{context.DeadlineExceeded, true},
		{io.ErrUnexpectedEOF, true},
		{net.ErrClosed, true},
		{&net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, true},
		{syscall.ECONNRESET, true},
	} {
		if got := defaultFailure(c.err); got != c.want {
			t.Errorf("defaultFailure(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// A half-open probe whose outcome the Settings exclude changes no state:
// the target must be listed again for the next probe, not stay out.
func TestBreakerExcludedProbeListedAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ps := providers(2)
		ps[0].failing.Store(true)
		d, _ := NewBreakerDirectory(static(ps), WithConsecutiveFailures(1), WithOpenTimeout(time.Second),
			WithBreakerSettings(func(string) gobreaker.Settings {
				return gobreaker.Settings{IsExcluded: func(err error) bool { return errors.Is(err, context.Canceled) }}
			}))
		callTarget(t, d, "a", 1) // opens
		time.Sleep(2 * time.Second)
		ps[0].err = context.Canceled // the probe's outcome is excluded
		callTarget(t, d, "a", 1)
		if got := strings.Join(listed(t, d), ","); got != "a,b" {
			t.Errorf("after an excluded probe listed %q, want a,b (a probe left)", got)
		}
	})
}
