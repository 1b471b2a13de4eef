package subscribertest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/subscriber"
)

// Harness connects the conformance suite (Run) to one registry
// implementation: a way to make adapters (clients), a provider side that
// registers instances, and control of the backing registry. Every field
// is required.
//
// Run calls the functions from the test goroutine, one at a time. Each
// may fail the test (t.Fatal) when the registry does not do what is asked
// within a bounded time.
type Harness struct {
	// NewRegistry returns a new adapter with its own client of the
	// backing registry, and a function that closes both (adapter, then
	// client). The registry may be down: the client must then keep trying
	// to connect on its own, or leave it to the adapter's attempts. Run
	// calls close exactly once, after closing the Manager that used the
	// adapter (or without any Manager).
	NewRegistry func(t *testing.T) (reg subscriber.Registry, close func())

	// Register publishes inst as an instance of key's service, as a
	// provider would, and returns once the registry holds it. The
	// registry is running. inst has IP, Port, Weight 1, Healthy and
	// Enabled set, and Cluster either empty (the registry's default
	// cluster) or a name; instances are told apart by IP and Port.
	Register func(t *testing.T, key subscriber.Key, inst subscriber.Instance)

	// Deregister removes an instance published by Register (same IP and
	// Port) and returns once the registry no longer holds it. The
	// registry is running.
	Deregister func(t *testing.T, key subscriber.Key, inst subscriber.Instance)

	// Stop stops the backing registry as a crash would: clients' calls
	// fail and their connections break. It returns once it is down.
	Stop func(t *testing.T)

	// Start starts the stopped registry again on the same address and
	// returns once it serves clients, with every instance that was
	// registered and not deregistered back in place (as providers
	// re-registering after a restart would make it).
	Start func(t *testing.T)

	// Leaks lists the goroutines that the registry's client library
	// leaves behind by design; the leak checks ignore them. Each should
	// be as precise as possible (goleak.IgnoreTopFunction).
	//
	// The leak checks compare the goroutines running before and after an
	// adapter's life, so the provider side must not run goroutines that
	// come and go meanwhile: Register and Deregister should not leave a
	// client of their own running (it would reconnect in the background
	// while the registry is down). Register on the server side, or
	// through a client closed before Register returns.
	Leaks []goleak.Option

	// Timeout bounds each wait for a condition (a list, a state, a
	// failed attempt). Optional: 0 means WaitTimeout.
	Timeout time.Duration
}

// Policy is the Manager's retry policy in Run: jittered and capped like
// the default, but fast (100 ms doubling to 1 s), so that the suite takes
// seconds.
var Policy = rebound.Policy{Initial: 100 * time.Millisecond, Max: time.Second}

// WaitTimeout bounds every wait of Run for a condition on real time and
// real sockets: long enough for a slow machine, short enough to fail a
// broken implementation.
const WaitTimeout = 20 * time.Second

// Run runs the conformance suite against the registry behind h: the same
// behavioural tests, through a subscriber.Manager, for every Registry
// implementation. The registry must be running when Run starts; Run
// leaves it running. Subtests:
//
//   - Deliver: instances registered before and after subscribing are
//     delivered as full lists, each real state once, in order; Status
//     says subscribed.
//   - Clusters: Key.Clusters restricts the list; a change in another
//     cluster delivers nothing.
//   - DownAtStart: with the registry down when the client is created,
//     attempts fail with transient errors, without spinning, until it
//     starts; then the subscription becomes ready with the list.
//   - Restart: after a crash and a restart the subscription is confirmed
//     again and delivers later changes; no empty list is delivered
//     meanwhile.
//   - ConfirmsReconnects (adapters that implement
//     subscriber.ConnectionMonitor with ConfirmsReconnects true; skipped otherwise):
//     after a crash and a restart the adapter answers for every
//     subscription by itself (Sink.Confirmed, or Sink.Resubscribe and the
//     Manager's confirmation), without the Manager's safety cap, which is
//     set to an hour here; later changes are delivered.
//   - Flapping: several quick restarts, then a change: the subscription
//     converges, its listener got only real states in order, and the
//     adapter pushed the final list at most once.
//   - ExactlyOnce: after a restart has made the Manager call Subscribe
//     again for two sinks of one key, every change reaches each listener
//     exactly once, and each adapter sink at least once and as a push
//     (outside a Subscribe call) at most once: an adapter that adds a
//     delivery per Subscribe call fails here. (A confirmation racing with
//     a change may legitimately hand its list over once more.)
//   - Unsubscribe: after Unsubscribe, the adapter never calls the sink
//     again and the listener gets nothing more.
//   - RegistryClosed: once the adapter is closed, a subscription stops for
//     good with an error matching rebound.ErrClosed.
//   - CloseWithoutLeaks: closing the Manager and the adapter, while
//     subscribed and while retrying against a registry that is down,
//     leaves no goroutine behind (except h.Leaks).
func Run(t *testing.T, h Harness) {
	t.Helper()
	if h.NewRegistry == nil || h.Register == nil || h.Deregister == nil || h.Stop == nil || h.Start == nil {
		t.Fatal("subscribertest.Run: every function of the Harness must be set")
	}
	s := &suite{h: h, timeout: h.Timeout}
	if s.timeout <= 0 {
		s.timeout = WaitTimeout
	}
	t.Run("Deliver", s.deliver)
	t.Run("Clusters", s.clusters)
	t.Run("DownAtStart", s.downAtStart)
	t.Run("Restart", s.restart)
	t.Run("ConfirmsReconnects", s.confirmsReconnects)
	t.Run("Flapping", s.flapping)
	t.Run("ExactlyOnce", s.exactlyOnce)
	t.Run("Unsubscribe", s.unsubscribe)
	t.Run("RegistryClosed", s.registryClosed)
	t.Run("CloseWithoutLeaks", s.closeWithoutLeaks)
}

type suite struct {
	h       Harness
	timeout time.Duration
}

// key returns a service key of its own for a subtest.
func key(t *testing.T) subscriber.Key {
	name := strings.NewReplacer("/", "-", " ", "-").Replace(t.Name())
	return subscriber.Key{Service: "conformance-" + strings.ToLower(name)}
}

// Instance returns the instance ip:port as the suite registers it.
func Instance(ip string, port uint64) subscriber.Instance {
	return subscriber.Instance{IP: ip, Port: port, Weight: 1, Healthy: true, Enabled: true}
}

// stack is an adapter wrapped to count what it does, and a Manager on it.
type stack struct {
	timeout time.Duration
	m       *subscriber.Manager
	reg     *counted
	close   func()
	once    sync.Once
}

// newStack builds an adapter (through the harness), a counting wrapper
// and a Manager; both are closed at cleanup unless closed before.
func (s *suite) newStack(t *testing.T, opts ...subscriber.Option) *stack {
	t.Helper()
	inner, closeReg := s.h.NewRegistry(t)
	c := wrap(inner)
	log := zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
	opts = append([]subscriber.Option{subscriber.WithPolicy(Policy), subscriber.WithLogger(log)}, opts...)
	m, err := subscriber.New(c.registry(), opts...)
	if err != nil {
		closeReg()
		t.Fatal(err)
	}
	st := &stack{timeout: s.timeout, m: m, reg: c, close: closeReg}
	t.Cleanup(st.shutdown)
	return st
}

// shutdown closes the Manager, then the adapter. Idempotent.
func (st *stack) shutdown() {
	st.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), WaitTimeout)
		defer cancel()
		_ = st.m.Shutdown(ctx)
		st.close()
	})
}

func (st *stack) subscribe(t *testing.T, k subscriber.Key) (*subscriber.Subscription, *recorder) {
	t.Helper()
	rec := &recorder{timeout: st.timeout}
	sub, err := st.m.Subscribe(context.Background(), k, rec.listen)
	if err != nil {
		t.Fatal(err)
	}
	return sub, rec
}

func (s *suite) deliver(t *testing.T) {
	k := key(t)
	a := Instance("10.1.0.1", 8080)
	a.Metadata = map[string]string{"version": "1"}
	s.h.Register(t, k, a)
	st := s.newStack(t)
	sub, rec := st.subscribe(t, k)
	rec.wait(t, "10.1.0.1:8080")
	waitReady(t, s.timeout, sub)
	got := rec.lastList()
	if len(got) != 1 || got[0].Weight != 1 || !got[0].Healthy || !got[0].Enabled || got[0].Metadata["version"] != "1" {
		t.Fatalf("delivered %+v, want the registered instance with its weight, flags and metadata", got)
	}
	b := Instance("10.1.0.2", 8080)
	s.h.Register(t, k, b)
	rec.wait(t, "10.1.0.1:8080,10.1.0.2:8080")
	s.h.Deregister(t, k, a)
	rec.wait(t, "10.1.0.2:8080")
	rec.assertStates(t, "10.1.0.1:8080", "10.1.0.1:8080,10.1.0.2:8080", "10.1.0.2:8080")
	if status := sub.Status(); status.State != subscriber.StateSubscribed || status.LastErr != nil {
		t.Fatalf("status = %+v, want subscribed without error", status)
	}
}

func (s *suite) clusters(t *testing.T) {
	k := key(t)
	def := Instance("10.2.0.1", 8080)
	east := Instance("10.2.0.2", 8080)
	east.Cluster = "east"
	s.h.Register(t, k, def)
	s.h.Register(t, k, east)
	st := s.newStack(t)
	ke := k
	ke.Clusters = []string{"east"}
	_, recEast := st.subscribe(t, ke)
	_, recAll := st.subscribe(t, k)
	recEast.wait(t, "10.2.0.2:8080")
	recAll.wait(t, "10.2.0.1:8080,10.2.0.2:8080")
	s.h.Register(t, k, Instance("10.2.0.3", 8080)) // default cluster
	recAll.wait(t, "10.2.0.1:8080,10.2.0.2:8080,10.2.0.3:8080")
	east2 := Instance("10.2.0.4", 8080)
	east2.Cluster = "east"
	s.h.Register(t, k, east2) // a fence: later than the change above
	recEast.wait(t, "10.2.0.2:8080,10.2.0.4:8080")
	recEast.assertStates(t, "10.2.0.2:8080", "10.2.0.2:8080,10.2.0.4:8080")
}

func (s *suite) downAtStart(t *testing.T) {
	k := key(t)
	s.h.Stop(t)
	started := false
	defer func() {
		if !started {
			s.h.Start(t)
		}
	}()
	st := s.newStack(t)
	sub, rec := st.subscribe(t, k)
	begin := time.Now()
	eventually(t, s.timeout, "three failed attempts", func() bool { return sub.Status().TotalAttempts >= 3 })
	status, elapsed := sub.Status(), time.Since(begin)
	if status.State != subscriber.StateRetrying && status.State != subscriber.StatePending {
		t.Fatalf("state while down = %v, want retrying", status.State)
	}
	if status.LastErr == nil || rebound.IsPermanent(status.LastErr) || errors.Is(status.LastErr, rebound.ErrClosed) {
		t.Fatalf("last error while down = %v, want a transient error", status.LastErr)
	}
	checkNoSpin(t, status.TotalAttempts, elapsed)
	s.h.Start(t)
	started = true
	s.h.Register(t, k, Instance("10.3.0.1", 8080))
	rec.wait(t, "10.3.0.1:8080")
	waitReady(t, s.timeout, sub)
}

// checkNoSpin fails if attempts made over elapsed show a loop that does
// not wait: with Policy the delays average about 0.5 s once capped, and a
// loop that spins (even one paced by the Manager's limiter, 100/s) makes
// far more attempts than this bound.
func checkNoSpin(t *testing.T, attempts int, elapsed time.Duration) {
	t.Helper()
	if limit := 10 + int(8*elapsed.Seconds()); attempts > limit {
		t.Fatalf("%d attempts in %v: the retry loop spins (bound %d)", attempts, elapsed, limit)
	}
}

func (s *suite) restart(t *testing.T) {
	k := key(t)
	s.h.Register(t, k, Instance("10.4.0.1", 8080))
	st := s.newStack(t)
	sub, rec := st.subscribe(t, k)
	rec.wait(t, "10.4.0.1:8080")
	before, stopped := sub.Status().TotalAttempts, time.Now()
	s.h.Stop(t)
	eventually(t, s.timeout, "the subscription to notice the outage", func() bool {
		return sub.Status().State == subscriber.StateRetrying
	})
	s.h.Start(t)
	eventually(t, s.timeout, "the subscription to be confirmed again", func() bool {
		status := sub.Status()
		// Confirmed again: by a new attempt, or (ConfirmsReconnects) by
		// the adapter's evidence.
		return status.State == subscriber.StateSubscribed && (status.TotalAttempts > before || status.ConfirmedAt.After(stopped))
	})
	s.h.Register(t, k, Instance("10.4.0.2", 8080))
	rec.wait(t, "10.4.0.1:8080,10.4.0.2:8080")
	rec.assertStates(t, "10.4.0.1:8080", "10.4.0.1:8080,10.4.0.2:8080")
}

func (s *suite) confirmsReconnects(t *testing.T) {
	st := s.newStack(t, subscriber.WithConfirmTimeout(time.Hour))
	if mon, ok := st.reg.inner.(subscriber.ConnectionMonitor); !ok || !mon.ConfirmsReconnects() {
		t.Skip("the adapter does not confirm reconnects: the Manager confirms them itself (Restart)")
	}
	keys := []subscriber.Key{key(t), key(t), key(t)}
	for i := range keys {
		keys[i].Service = fmt.Sprintf("%s-%d", keys[i].Service, i)
		s.h.Register(t, keys[i], Instance(fmt.Sprintf("10.12.0.%d", i+1), 8080))
	}
	subs := make([]*subscriber.Subscription, len(keys))
	recs := make([]*recorder, len(keys))
	for i, k := range keys {
		subs[i], recs[i] = st.subscribe(t, k)
		recs[i].wait(t, fmt.Sprintf("10.12.0.%d:8080", i+1))
		waitReady(t, s.timeout, subs[i])
	}
	s.h.Stop(t)
	eventually(t, s.timeout, "the subscriptions to notice the outage", func() bool {
		for _, sub := range subs {
			if sub.Status().State != subscriber.StateRetrying {
				return false
			}
		}
		return true
	})
	s.h.Start(t)
	eventually(t, s.timeout, "the adapter to answer for every subscription (the Manager's cap is an hour)", func() bool {
		for _, sub := range subs {
			if st := sub.Status(); st.State != subscriber.StateSubscribed && st.State != subscriber.StateHeld {
				return false
			}
		}
		return true
	})
	for i, k := range keys {
		s.h.Register(t, k, Instance(fmt.Sprintf("10.12.1.%d", i+1), 8080))
		recs[i].wait(t, fmt.Sprintf("10.12.0.%d:8080,10.12.1.%d:8080", i+1, i+1))
	}
}

func (s *suite) flapping(t *testing.T) {
	k := key(t)
	s.h.Register(t, k, Instance("10.5.0.1", 8080))
	st := s.newStack(t)
	sub, rec := st.subscribe(t, k)
	rec.wait(t, "10.5.0.1:8080")
	for range 3 {
		s.h.Stop(t)
		s.h.Start(t)
	}
	s.h.Register(t, k, Instance("10.5.0.2", 8080))
	final := "10.5.0.1:8080,10.5.0.2:8080"
	rec.wait(t, final)
	eventually(t, s.timeout, "the subscription to settle", func() bool {
		return sub.Status().State == subscriber.StateSubscribed
	})
	// A fence: once its list is in, any late duplicate of the previous
	// list would have arrived before it.
	s.h.Register(t, k, Instance("10.5.0.3", 8080))
	rec.wait(t, final+",10.5.0.3:8080")
	rec.assertStates(t, "10.5.0.1:8080", final, final+",10.5.0.3:8080")
	sink := st.reg.only(t)
	if n := st.reg.pushesOf(sink, final); n > 1 {
		t.Fatalf("the adapter pushed the list %q %d times, want at most once", final, n)
	}
}

func (s *suite) exactlyOnce(t *testing.T) {
	k := key(t)
	a, b, c, d := Instance("10.6.0.1", 8080), Instance("10.6.0.2", 8080), Instance("10.6.0.3", 8080), Instance("10.6.0.4", 8080)
	s.h.Register(t, k, a)
	st := s.newStack(t)
	sub1, rec1 := st.subscribe(t, k)
	sub2, rec2 := st.subscribe(t, k) // two subscriptions of one key
	rec1.wait(t, "10.6.0.1:8080")
	rec2.wait(t, "10.6.0.1:8080")

	// A restart makes the Manager call Subscribe again for both sinks (or a
	// ConfirmsReconnects confirm both from evidence).
	b1, b2, stopped := sub1.Status().TotalAttempts, sub2.Status().TotalAttempts, time.Now()
	s.h.Stop(t)
	s.h.Start(t)
	eventually(t, s.timeout, "both subscriptions to be confirmed again", func() bool {
		s1, s2 := sub1.Status(), sub2.Status()
		return s1.State == subscriber.StateSubscribed && (s1.TotalAttempts > b1 || s1.ConfirmedAt.After(stopped)) &&
			s2.State == subscriber.StateSubscribed && (s2.TotalAttempts > b2 || s2.ConfirmedAt.After(stopped))
	})
	rec1.wait(t, "10.6.0.1:8080")
	rec2.wait(t, "10.6.0.1:8080")
	n1, n2 := rec1.count(), rec2.count()

	states := []string{
		"10.6.0.1:8080,10.6.0.2:8080",
		"10.6.0.1:8080,10.6.0.2:8080,10.6.0.3:8080",
		"10.6.0.2:8080,10.6.0.3:8080",
		"10.6.0.2:8080,10.6.0.3:8080,10.6.0.4:8080", // the fence
	}
	steps := []func(){
		func() { s.h.Register(t, k, b) },
		func() { s.h.Register(t, k, c) },
		func() { s.h.Deregister(t, k, a) },
		func() { s.h.Register(t, k, d) },
	}
	for i, step := range steps {
		step()
		rec1.wait(t, states[i])
		rec2.wait(t, states[i])
	}
	for i, rec := range []*recorder{rec1, rec2} {
		n := []int{n1, n2}[i]
		if got := rec.since(n); !slices.Equal(got, states) {
			t.Fatalf("listener %d got %q after the restart, want each change once: %q", i+1, got, states)
		}
	}
	sinks := st.reg.sinks()
	if len(sinks) != 2 {
		t.Fatalf("the adapter saw %d sinks, want 2", len(sinks))
	}
	for sink := range sinks {
		for _, state := range states[:len(states)-1] {
			// Each change reaches each sink: pushed at most once, or
			// (if a late confirmation raced with it) as the
			// confirmation's list.
			if n := st.reg.pushesOf(sink, state); n > 1 {
				t.Fatalf("the adapter pushed %q to one sink %d times, want at most once", state, n)
			}
			if n := st.reg.updatesOf(sink, state); n < 1 {
				t.Fatalf("the adapter never handed %q to one sink", state)
			}
		}
	}
}

func (s *suite) unsubscribe(t *testing.T) {
	k := key(t)
	s.h.Register(t, k, Instance("10.7.0.1", 8080))
	st := s.newStack(t)
	sub, rec := st.subscribe(t, k)
	rec.wait(t, "10.7.0.1:8080")
	if err := sub.Unsubscribe(); err != nil {
		t.Fatalf("Unsubscribe = %v", err)
	}
	if !errors.Is(sub.Err(), rebound.ErrClosed) {
		t.Fatalf("Err = %v, want an error matching rebound.ErrClosed (unsubscribed)", sub.Err())
	}
	sink := st.reg.only(t)
	after := st.reg.updateCount(sink)
	n := rec.count()
	s.h.Register(t, k, Instance("10.7.0.2", 8080))
	// A fence: a new subscription sees the change, so any delivery of it
	// to the old one would have happened by then.
	_, rec2 := st.subscribe(t, k)
	rec2.wait(t, "10.7.0.1:8080,10.7.0.2:8080")
	if got := rec.count(); got != n {
		t.Fatalf("the listener got %d lists after Unsubscribe", got-n)
	}
	if got := st.reg.updateCount(sink); got != after {
		t.Fatalf("the adapter called the unsubscribed sink %d times after Unsubscribe returned", got-after)
	}
}

func (s *suite) registryClosed(t *testing.T) {
	k := key(t)
	st := s.newStack(t)
	st.close()
	sub, err := st.m.Subscribe(context.Background(), k, func([]subscriber.Instance) {})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-sub.Done():
	case <-time.After(s.timeout):
		t.Fatalf("a subscription on a closed adapter still runs: %+v", sub.Status())
	}
	if !errors.Is(sub.Err(), rebound.ErrClosed) {
		t.Fatalf("Err = %v, want an error matching rebound.ErrClosed", sub.Err())
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	if err := st.m.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
}

func (s *suite) closeWithoutLeaks(t *testing.T) {
	t.Run("Subscribed", func(t *testing.T) {
		k := key(t)
		s.h.Register(t, k, Instance("10.8.0.1", 8080))
		// The provider side may start goroutines after Register returns
		// (keep-alives, streams): let a first client see the instance
		// before taking the snapshot of running goroutines.
		warm := s.newStack(t)
		_, rec := warm.subscribe(t, k)
		rec.wait(t, "10.8.0.1:8080")
		warm.shutdown()
		ignore := goleak.IgnoreCurrent()
		st := s.newStack(t)
		var recs []*recorder
		for range 3 {
			_, rec := st.subscribe(t, k)
			recs = append(recs, rec)
		}
		for _, rec := range recs {
			rec.wait(t, "10.8.0.1:8080")
		}
		st.shutdown()
		s.findLeaks(t, ignore)
	})
	t.Run("Retrying", func(t *testing.T) {
		k := key(t)
		s.h.Stop(t)
		defer s.h.Start(t)
		ignore := goleak.IgnoreCurrent()
		st := s.newStack(t)
		sub, _ := st.subscribe(t, k)
		eventually(t, s.timeout, "two failed attempts", func() bool { return sub.Status().TotalAttempts >= 2 })
		st.shutdown()
		s.findLeaks(t, ignore)
	})
}

// findLeaks fails the test if goroutines other than those running when
// ignore was taken (and h.Leaks) are still running: it retries for a few
// seconds, as connections close asynchronously on both sides.
func (s *suite) findLeaks(t *testing.T, ignore goleak.Option) {
	t.Helper()
	if err := FindLeaks(s.timeout, append([]goleak.Option{ignore}, s.h.Leaks...)...); err != nil {
		t.Fatalf("goroutines left after Close: %v", err)
	}
}

func waitReady(t *testing.T, d time.Duration, sub *subscriber.Subscription) {
	t.Helper()
	select {
	case <-sub.Ready():
	case <-time.After(d):
		t.Fatalf("not ready: %+v", sub.Status())
	}
}

// eventually polls cond every 10 ms until it holds, failing the test after
// d.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	Eventually(t, d, what, cond)
}

// Addrs returns the addresses of a list as "ip:port" sorted and joined
// with ",".
func Addrs(list []subscriber.Instance) string {
	out := make([]string, len(list))
	for i, in := range list {
		out[i] = fmt.Sprintf("%s:%d", in.IP, in.Port)
	}
	slices.Sort(out)
	return strings.Join(out, ",")
}

// recorder is a listener that keeps every list.
type recorder struct {
	timeout time.Duration // of wait
	mu      sync.Mutex
	lists   [][]subscriber.Instance
}

func (r *recorder) listen(list []subscriber.Instance) {
	r.mu.Lock()
	r.lists = append(r.lists, list)
	r.mu.Unlock()
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.lists)
}

func (r *recorder) lastList() []subscriber.Instance {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.lists) == 0 {
		return nil
	}
	return r.lists[len(r.lists)-1]
}

// since returns the addresses of the lists delivered after the first n.
func (r *recorder) since(n int) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, l := range r.lists[n:] {
		out = append(out, Addrs(l))
	}
	return out
}

func (r *recorder) wait(t *testing.T, want string) {
	t.Helper()
	eventually(t, r.timeout, fmt.Sprintf("the list %q", want), func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return len(r.lists) > 0 && Addrs(r.lists[len(r.lists)-1]) == want
	})
}

// assertStates checks that the delivered lists are, in order, a
// subsequence of states: coalescing is allowed; an invented, repeated or
// reordered list is not.
func (r *recorder) assertStates(t *testing.T, states ...string) {
	t.Helper()
	got := r.since(0)
	j := 0
	for i, g := range got {
		for j < len(states) && states[j] != g {
			j++
		}
		if j == len(states) {
			t.Fatalf("list %d %q is not a later real state; delivered %q, states %q", i, g, got, states)
		}
		j++
	}
}

// counted wraps an adapter to count, per Manager sink, the lists the
// adapter hands over. It keeps one wrapper sink per Manager sink, so the
// adapter sees stable sinks, and reports updates made after the
// adapter's Unsubscribe returned.
type counted struct {
	inner subscriber.Registry
	mu    sync.Mutex
	wraps map[subscriber.Sink]*countedSink
}

type countedSink struct {
	c           *counted
	sink        subscriber.Sink
	subscribing int      // Subscribe calls in progress for this sink
	updates     []string // Addrs of every list, in order
	pushes      []string // Addrs of the lists handed over outside Subscribe
}

func (s *countedSink) Update(list []subscriber.Instance) {
	a := Addrs(list)
	s.c.mu.Lock()
	s.updates = append(s.updates, a)
	if s.subscribing == 0 {
		s.pushes = append(s.pushes, a)
	}
	s.c.mu.Unlock()
	s.sink.Update(list)
}

func (s *countedSink) Resubscribe(err error)   { s.sink.Resubscribe(err) }
func (s *countedSink) Confirmed(reason string) { s.sink.Confirmed(reason) }

func wrap(inner subscriber.Registry) *counted {
	return &counted{inner: inner, wraps: make(map[subscriber.Sink]*countedSink)}
}

// registry returns the wrapper, with the optional interfaces of inner
// (ConnectionMonitor, Reconciler) forwarded.
func (c *counted) registry() subscriber.Registry {
	mon, isMon := c.inner.(subscriber.ConnectionMonitor)
	lk, isLk := c.inner.(subscriber.Reconciler)
	switch {
	case isMon && isLk:
		return struct {
			countedMonitor
			subscriber.Reconciler
		}{countedMonitor{c, mon}, lk}
	case isMon:
		return countedMonitor{c, mon}
	case isLk:
		return struct {
			*counted
			subscriber.Reconciler
		}{c, lk}
	}
	return c
}

type countedMonitor struct {
	*counted
	mon subscriber.ConnectionMonitor
}

func (m countedMonitor) MonitorConnection(ctx context.Context, report func(connected bool)) error {
	return m.mon.MonitorConnection(ctx, report)
}

func (m countedMonitor) ConfirmsReconnects() bool { return m.mon.ConfirmsReconnects() }

func (c *counted) sinkFor(s subscriber.Sink) *countedSink {
	c.mu.Lock()
	defer c.mu.Unlock()
	w, ok := c.wraps[s]
	if !ok {
		w = &countedSink{c: c, sink: s}
		c.wraps[s] = w
	}
	return w
}

func (c *counted) Subscribe(ctx context.Context, k subscriber.Key, s subscriber.Sink) error {
	w := c.sinkFor(s)
	c.mu.Lock()
	w.subscribing++
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		w.subscribing--
		c.mu.Unlock()
	}()
	return c.inner.Subscribe(ctx, k, w)
}

func (c *counted) Unsubscribe(ctx context.Context, k subscriber.Key, s subscriber.Sink) error {
	return c.inner.Unsubscribe(ctx, k, c.sinkFor(s))
}

// sinks returns the wrapper sinks, a set.
func (c *counted) sinks() map[*countedSink]struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[*countedSink]struct{}, len(c.wraps))
	for _, w := range c.wraps {
		out[w] = struct{}{}
	}
	return out
}

// only returns the single sink the adapter saw.
func (c *counted) only(t *testing.T) *countedSink {
	t.Helper()
	sinks := c.sinks()
	if len(sinks) != 1 {
		t.Fatalf("the adapter saw %d sinks, want 1", len(sinks))
	}
	for s := range maps.Keys(sinks) {
		return s
	}
	return nil
}

func (c *counted) updateCount(s *countedSink) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(s.updates)
}

// pushesOf counts the lists equal to state that the adapter handed to s
// outside a Subscribe call: changes it pushed. A confirmation (Subscribe)
// legitimately hands over the current list once more; a change pushed
// twice is a duplicate delivery.
func (c *counted) pushesOf(s *countedSink, state string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, u := range s.pushes {
		if u == state {
			n++
		}
	}
	return n
}

// updatesOf counts every list equal to state handed to s.
func (c *counted) updatesOf(s *countedSink, state string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, u := range s.updates {
		if u == state {
			n++
		}
	}
	return n
}
