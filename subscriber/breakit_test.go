package subscriber_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"golang.org/x/time/rate"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/subscribertest"
)

// checkRate fails if the request times in at (sorted) exceed what a
// token bucket of limit per second and burst allows in any window.
func checkRate(t *testing.T, at []time.Time, limit, burst int) {
	t.Helper()
	for i := range at {
		for j := i; j < len(at); j++ {
			w := at[j].Sub(at[i])
			if allowed := burst + int(math.Floor(w.Seconds()*float64(limit)+1e-6)); j-i+1 > allowed {
				t.Fatalf("%d requests within %v (from request %d at %v, previous at %v), a limiter of %d/s burst %d allows %d", j-i+1, w, i, at[i].Sub(at[0]), at[max(i-1, 0)].Sub(at[0]), limit, burst, allowed)
			}
			if w > 3*time.Second {
				break
			}
		}
	}
}

// Thousands of subscriptions created while the registry is down share the
// limiter: their retries never exceed its rate, and once the registry is
// back every one of them is acknowledged within N/limit+1 s.
func TestBreakStormPacedAndAckedInTime(t *testing.T) {
	for _, redo := range []bool{false, true} {
		t.Run(fmt.Sprint("redo=", redo), func(t *testing.T) { stormPacedAndAckedInTime(t, redo, false, 50) })
	}
	// A budget and a throttle emptied by the outage hold back no first
	// attempt of the runs the return starts.
	t.Run("budget+throttle", func(t *testing.T) { stormPacedAndAckedInTime(t, false, true, 50) })
	// A burst below rate x TimerSlack: token waits off the grid.
	t.Run("burst=3", func(t *testing.T) { stormPacedAndAckedInTime(t, false, false, 3) })
}

func stormPacedAndAckedInTime(t *testing.T, redo, gates bool, burst int) {
	synctest.Test(t, func(t *testing.T) {
		const n, limit = 2000, 500
		var opts []subscriber.Option
		if gates {
			b, err := rebound.NewRetryBudget(0.1, 1, 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			thr, err := rebound.NewAdaptiveThrottle(2, 30*time.Second, seeded(1))
			if err != nil {
				t.Fatal(err)
			}
			opts = append(opts, subscriber.WithBudget(b), subscriber.WithThrottle(thr))
		}
		reg := subscribertest.New()
		if redo {
			reg.EnableRedo(nil)
		}
		reg.SetDown(true)
		var mu sync.Mutex
		var at []time.Time
		reg.OnSubscribe(func(subscriber.Key) {
			mu.Lock()
			at = append(at, time.Now())
			mu.Unlock()
		})
		m := newManager(t, reg, append(opts, subscriber.WithLimiter(rate.NewLimiter(limit, burst)))...)
		subs := make([]*subscriber.Subscription, n)
		for i := range subs {
			subs[i] = mustSubscribe(t, m, subscriber.Key{Service: fmt.Sprint("svc", i)}, func([]subscriber.Instance) {})
		}
		synctest.Wait()
		mu.Lock()
		first := len(at)
		at = at[:0] // the first attempts take no token
		mu.Unlock()
		if first != n {
			t.Fatalf("%d first attempts, want %d", first, n)
		}
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		back := time.Now()
		reg.SetDown(false)
		var last time.Time
		for _, s := range subs {
			<-s.Ready()
		}
		last = time.Now()
		synctest.Wait()
		if d, max := last.Sub(back), time.Duration(n/limit+1)*time.Second; d > max {
			t.Errorf("every subscription acknowledged %v after the registry came back, want <= %v", d, max)
		}
		mu.Lock()
		checkRate(t, at, limit, burst)
		total := first + len(at)
		mu.Unlock()
		sum, deferred := 0, 0
		for _, st := range m.Status() {
			if st.State != subscriber.StateSubscribed && st.State != subscriber.StateHeld { // held: an empty first list after the reconnect
				t.Fatalf("status %+v", st)
			}
			sum += st.TotalAttempts
			deferred += st.Deferred
		}
		if gates && deferred == 0 {
			t.Fatal("the budget and the throttle deferred no retry during the outage")
		}
		if sum != total || reg.Stats().Subscribes != total {
			t.Fatalf("sum of TotalAttempts %d, registry saw %d, recorded %d", sum, reg.Stats().Subscribes, total)
		}
	})
}

// lookupTimes is a Registry whose Lookups are recorded.
type lookupTimes struct {
	*subscribertest.Registry
	mu sync.Mutex
	at []time.Time
}

func (r *lookupTimes) Lookup(ctx context.Context, key subscriber.Key) ([]subscriber.Instance, error) {
	r.mu.Lock()
	r.at = append(r.at, time.Now())
	r.mu.Unlock()
	return r.Registry.Lookup(ctx, key)
}

// Refresh Lookups of thousands of subscriptions at once share the limiter
// and never exceed its rate.
func TestBreakRefreshLookupsPaced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n, limit, burst = 2000, 500, 50
		reg := &lookupTimes{Registry: subscribertest.New()}
		m := newManager(t, reg, subscriber.WithLimiter(rate.NewLimiter(limit, burst)))
		subs := make([]*subscriber.Subscription, n)
		for i := range subs {
			k := subscriber.Key{Service: fmt.Sprint("svc", i)}
			reg.Set(k, inst("10.0.0.1"))
			subs[i] = mustSubscribe(t, m, k, func([]subscriber.Instance) {})
		}
		for _, s := range subs {
			<-s.Ready()
		}
		time.Sleep(time.Minute) // refill the limiter
		for _, s := range subs {
			s.Refresh()
		}
		time.Sleep(time.Duration(n/limit+2) * time.Second)
		synctest.Wait()
		reg.mu.Lock()
		defer reg.mu.Unlock()
		if len(reg.at) != n {
			t.Fatalf("%d lookups, want %d", len(reg.at), n)
		}
		checkRate(t, reg.at, limit, burst)
	})
}

// Subscriptions whose first attempt is in flight when the connection comes
// back start a new run when it ends: its first attempt takes a limiter
// token, like that of any later run; it did not (the engine was asked
// Ready again for the attempt it had already admitted, without a token).
func TestBreakAttemptAfterAReconnectInFlightTakesAToken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 10
		reg := subscribertest.New()
		release := make(chan struct{})
		reg.SetFailure(func(subscriber.Key) error {
			<-release
			return errRejected
		})
		m := newManager(t, reg, subscriber.WithLimiter(rate.NewLimiter(1, 1)))
		subs := subscribeN(t, m, n)
		synctest.Wait() // n first attempts block in the registry
		reg.SetDown(true)
		reg.SetDown(false) // Disconnected, Connected: each attempt in flight is cancelled
		synctest.Wait()
		var mu sync.Mutex
		var at []time.Duration
		start := time.Now()
		reg.SetFailure(nil)
		reg.OnSubscribe(func(subscriber.Key) {
			mu.Lock()
			at = append(at, time.Since(start))
			mu.Unlock()
		})
		close(release)
		time.Sleep(time.Minute)
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		if len(at) != n {
			t.Fatalf("%d attempts after the reconnect, want %d", len(at), n)
		}
		for i, d := range at {
			if min := time.Duration(i-1) * time.Second; d < min {
				t.Fatalf("attempt %d after the reconnect at %v, the limiter allows it at %v at the earliest (%v)", i+1, d, min, at)
			}
		}
		for _, s := range subs {
			if st := s.Status(); st.State != subscriber.StateSubscribed {
				t.Fatalf("%v: %v, want subscribed", st.Key, st.State)
			}
		}
	})
}

// Lists pushed while the registry flaps, restarts, breaks subscriptions
// and the subscriptions refresh, unsubscribe and stop by context reach
// each listener in order, never the same twice in a row; Close ends
// everything (the bubble checks no goroutine is left).
func TestBreakChaosOrderAndClose(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const n = 40
				rng := rand.New(rand.NewPCG(seed, 1))
				reg := subscribertest.New()
				if seed%2 == 1 {
					reg.EnableRedo(nil)
				}
				m, err := subscriber.New(reg, subscriber.WithLimiter(rate.NewLimiter(50, 5)),
					subscriber.WithEmptyListHold(3*time.Second), subscriber.WithReconcile(time.Second))
				if err != nil {
					t.Fatal(err)
				}
				type rec struct {
					mu    sync.Mutex
					lists []uint64 // the port of each list's instance; 0: empty
				}
				recs := make([]*rec, n)
				subs := make([]*subscriber.Subscription, n)
				keys := make([]subscriber.Key, n)
				version := make([]uint64, n)
				for i := range subs {
					keys[i] = subscriber.Key{Service: fmt.Sprint("svc", i)}
					r := &rec{}
					recs[i] = r
					ctx, cancel := context.WithCancel(context.Background())
					defer cancel()
					subs[i], err = m.Subscribe(ctx, keys[i], func(list []subscriber.Instance) {
						r.mu.Lock()
						defer r.mu.Unlock()
						if i%5 == 0 && len(r.lists)%2 == 0 {
							defer func() { panic("listener") }() // after the list is recorded
						}
						p := uint64(0)
						if len(list) > 0 {
							p = list[0].Port
						}
						r.lists = append(r.lists, p)
					})
					if err != nil {
						t.Fatal(err)
					}
					if i%7 == 3 { // armed after Subscribe: a 0 s draw ended Subscribe's own ctx
						time.AfterFunc(time.Duration(rng.IntN(20))*time.Second, cancel)
					}
				}
				for range 400 {
					i := rng.IntN(n)
					switch rng.IntN(12) {
					case 0:
						reg.SetDown(true)
					case 1:
						reg.SetDown(false)
					case 2:
						reg.Restart()
					case 3:
						reg.Break(keys[i])
					case 4:
						subs[i].Refresh()
					case 5:
						if rng.IntN(4) == 0 {
							go subs[i].Unsubscribe()
						}
					case 6:
						reg.Set(keys[i]) // empty
					case 7:
						reg.Forget()
					default:
						version[i]++
						reg.Set(keys[i], subscriber.Instance{IP: "10.0.0.1", Port: version[i]})
					}
					time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond)
				}
				reg.SetDown(false)
				time.Sleep(time.Minute)
				synctest.Wait()
				var byState [6]int
				for _, st := range m.Status() {
					byState[st.State]++
				}
				if c := m.Counts(); c.ByState != byState {
					t.Errorf("Counts.ByState %v, the statuses %v", c.ByState, byState)
				}
				go func() {
					for _, s := range subs {
						s.Status()
						s.Refresh()
					}
				}()
				if err := m.Close(); err != nil {
					t.Fatal(err)
				}
				total := 0
				for i, s := range subs {
					<-s.Done()
					total += len(recs[i].lists)
					r := recs[i]
					r.mu.Lock()
					var last uint64
					for j, p := range r.lists {
						if j > 0 && p == r.lists[j-1] {
							t.Errorf("%v: list %d delivered twice in a row: %v", keys[i], p, r.lists)
						}
						if p != 0 {
							if p < last {
								t.Errorf("%v: list %d after %d: %v", keys[i], p, last, r.lists)
							}
							last = p
						}
					}
					r.mu.Unlock()
				}
				sts := m.Status()
				if len(sts) != n {
					t.Fatalf("%d statuses after Close, want %d", len(sts), n)
				}
				sum := 0
				for i, st := range sts {
					sum += st.TotalAttempts
					if st.State != subscriber.StateStopped || st.Attempts > st.TotalAttempts || st.Deliveries != len(recs[i].lists) {
						t.Errorf("status %+v after Close, %d listener calls", st, len(recs[i].lists))
					}
				}
				if got := reg.Stats().Subscribes; got != sum {
					t.Errorf("the registry saw %d Subscribe calls, the statuses count %d", got, sum)
				}
				c := m.Counts()
				if c.Scheduled != 0 {
					t.Errorf("Counts after Close: %d due times left in the scheduler", c.Scheduled)
				}
				for st, k := range c.ByState {
					if st != int(subscriber.StateStopped) && k != 0 {
						t.Errorf("Counts after Close: %d %v", k, subscriber.State(st))
					}
				}
				if total < n {
					t.Fatalf("%d lists delivered to %d listeners", total, n)
				}
			})
		})
	}
}

// An attempt cancelled while it waited on the scheduler behind another
// (the subscription stopped meanwhile) sends no Registry.Subscribe: it is
// not counted in TotalAttempts ("every Registry.Subscribe call"). It was.
func TestBreakAttemptCancelledBeforeItIsSentIsNotCounted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := subscribertest.New()
		a, b := subscriber.Key{Service: "a"}, subscriber.Key{Service: "b"}
		var subB atomic.Pointer[subscriber.Subscription]
		var mu sync.Mutex
		calls := map[string]int{}
		reg.OnSubscribe(func(k subscriber.Key) {
			mu.Lock()
			calls[k.Service]++
			n := calls[k.Service]
			mu.Unlock()
			if k.Service == "a" && n == 2 {
				// a's retry runs first on the scheduler; b's waits behind it.
				subB.Load().Unsubscribe()
			}
		})
		reg.SetFailure(func(subscriber.Key) error { return errRejected })
		m := newManager(t, reg, subscriber.WithLimiter(nil),
			subscriber.WithPolicy(rebound.Policy{Initial: time.Second, Max: time.Second, Jitter: rebound.NoJitter}))
		subA := mustSubscribe(t, m, a, func([]subscriber.Instance) {})
		synctest.Wait()
		subB.Store(mustSubscribe(t, m, b, func([]subscriber.Instance) {}))
		synctest.Wait()
		time.Sleep(2500 * time.Millisecond)
		synctest.Wait()
		<-subB.Load().Done()
		mu.Lock()
		sentB := calls["b"]
		mu.Unlock()
		var stB subscriber.Status
		for _, st := range m.Status() {
			if st.ID == subB.Load().Status().ID {
				stB = st
			}
		}
		if stB.TotalAttempts != sentB {
			t.Fatalf("b: TotalAttempts %d, Registry.Subscribe calls %d", stB.TotalAttempts, sentB)
		}
		if st := subA.Status(); st.TotalAttempts != calls["a"] {
			t.Fatalf("a: TotalAttempts %d, Registry.Subscribe calls %d", st.TotalAttempts, calls["a"])
		}
	})
}

// A Refresh Lookup waiting for its limiter token when the connection is
// lost is given up (the token back); it was left waiting for good, and
// every later check of a held empty list was skipped ("a Lookup already on
// its way"): a lost re-registration push ended in an empty list at the
// hold's cap although the server held the providers.
func TestBreakLookupTokenWaitCutByADisconnect(t *testing.T) {
	const hold = 30 * time.Second
	synctest.Test(t, func(t *testing.T) {
		reg := subscribertest.New()
		reg.Set(orders, inst("10.0.0.1"))
		lim := rate.NewLimiter(1, 1)
		m := newManager(t, reg, subscriber.WithEmptyListHold(hold), subscriber.WithLimiter(lim))
		var rec recorder
		s := mustSubscribe(t, m, orders, rec.listen)
		<-s.Ready()
		synctest.Wait()
		for range 10 {
			lim.Reserve() // the next token in about 10 s
		}
		s.Refresh() // its Lookup waits for that token
		synctest.Wait()
		reg.SetDown(true)
		synctest.Wait()
		time.Sleep(20 * time.Second)
		t.Logf("XX after down %+v lookups %d", s.Status(), reg.Stats().Lookups) // the token's time passes while disconnected
		reg.Set(orders)                                                         // the providers are gone while the registry is down
		reg.SetDown(false)
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if st := s.Status(); st.State != subscriber.StateHeld {
			t.Fatalf("after the reconnect: %+v, want the empty list held", st)
		}
		before := reg.Stats()
		reg.LoseNextPush(orders)
		reg.Set(orders, inst("10.0.0.1")) // re-registered; its push is lost
		aMinuteLater(t, reg, &rec, before, [][]string{{"10.0.0.1"}}, 1)
	})
}

// Close while goroutines subscribe, unsubscribe, refresh and read Status,
// the registry flaps and listeners call Close and Unsubscribe: Close
// returns, every Subscribe after it fails with ErrManagerClosed, every
// subscription is done, and no goroutine is left (real time, goleak in
// TestMain).
func TestBreakCloseConcurrentWithEverything(t *testing.T) {
	for round := range 5 {
		reg := subscribertest.New()
		reg.Set(orders, inst("10.0.0.1"))
		m, err := subscriber.New(reg, subscriber.WithLimiter(rate.NewLimiter(1000, 10)), subscriber.WithReconcile(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		var all []*subscriber.Subscription
		closing := make(chan struct{})
		made := make(chan struct{}) // closed at the first subscription: Close races something
		var madeOnce sync.Once
		for g := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					var self atomic.Pointer[subscriber.Subscription]
					s, err := m.Subscribe(context.Background(), orders, func([]subscriber.Instance) {
						switch (g + i) % 5 {
						case 0:
							if err := m.Close(); err != rebound.ErrCalledFromCallback && err != nil {
								t.Errorf("Close from a listener: %v", err)
							}
						case 1:
							if s := self.Load(); s != nil {
								s.Unsubscribe()
							}
						case 2:
							panic("listener")
						}
					})
					if err != nil {
						if !errors.Is(err, subscriber.ErrManagerClosed) {
							t.Errorf("Subscribe: %v", err)
						}
						return
					}
					self.Store(s)
					mu.Lock()
					all = append(all, s)
					mu.Unlock()
					madeOnce.Do(func() { close(made) })
					s.Refresh()
					_ = m.Status()
					if i%3 == 0 {
						go s.Unsubscribe()
					}
					select {
					case <-closing:
						if _, err := m.Subscribe(context.Background(), orders, func([]subscriber.Instance) {}); !errors.Is(err, subscriber.ErrManagerClosed) {
							t.Errorf("Subscribe after Close returned: %v", err)
						}
						return
					default:
					}
				}
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-closing:
					return
				default:
				}
				switch i % 4 {
				case 0:
					reg.SetDown(true)
				case 1:
					reg.SetDown(false)
				case 2:
					reg.Restart()
				case 3:
					reg.Break(orders)
				}
				time.Sleep(time.Millisecond)
			}
		}()
		select { // on a loaded machine the goroutines may not have run in 20 ms
		case <-made:
		case <-time.After(30 * time.Second):
			t.Fatal("no subscription made within 30 s")
		}
		time.Sleep(time.Duration(20+round*10) * time.Millisecond)
		done := make(chan error, 1)
		go func() { done <- m.Close() }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("Close: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("Close did not return within 30 s")
		}
		close(closing)
		wg.Wait()
		mu.Lock()
		for _, s := range all {
			select {
			case <-s.Done():
			default:
				t.Fatalf("subscription %v not done after Close", s.Status())
			}
		}
		n := len(all)
		mu.Unlock()
		if n == 0 {
			t.Fatal("no subscription made before Close")
		}
		if err := m.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
	}
}

// A subscription disrupted while a Refresh's Subscribe is in flight
// starts a new confirmation: Status.Attempts counts the calls since the
// disruption, as it does when the Refresh had not been sent yet. It kept
// counting every call since the subscription started.
func TestBreakAttemptsAfterARefreshCutShort(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := subscribertest.New()
		reg.Set(orders, inst("10.0.0.1"))
		m := newManager(t, noReconciler{reg, reg}, subscriber.WithLimiter(nil))
		s := mustSubscribe(t, m, orders, func([]subscriber.Instance) {})
		<-s.Ready()
		synctest.Wait()
		release := make(chan struct{})
		reg.SetFailure(func(subscriber.Key) error {
			<-release
			return errRejected
		})
		s.Refresh()
		synctest.Wait() // the Refresh's Subscribe blocks in the registry
		var mu sync.Mutex
		since := 0
		reg.OnSubscribe(func(subscriber.Key) {
			mu.Lock()
			since++
			mu.Unlock()
		})
		reg.SetDown(true)
		synctest.Wait()
		if st := s.Status(); st.State != subscriber.StateRetrying || st.Attempts != 0 {
			t.Errorf("disrupted with the Refresh in flight: %v, Attempts %d; want retrying, 0 (no call since)", st.State, st.Attempts)
		}
		reg.SetFailure(nil)
		close(release)
		time.Sleep(5 * time.Second)
		reg.SetDown(false)
		time.Sleep(time.Minute)
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		if st := s.Status(); st.State != subscriber.StateSubscribed || st.Attempts != since || st.TotalAttempts != since+2 {
			t.Fatalf("confirmed again: %v, Attempts %d, TotalAttempts %d; want subscribed, %d, %d",
				st.State, st.Attempts, st.TotalAttempts, since, since+2)
		}
	})
}

// A Refresh's attempt cancelled by a reconnect while it waited on the
// scheduler behind another sends nothing: Status.Attempts counts the
// calls of the confirmation the reconnect started, never below 0.
func TestBreakRefreshCancelledBeforeItIsSent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := subscribertest.New()
		a, b := subscriber.Key{Service: "a"}, subscriber.Key{Service: "b"}
		m := newManager(t, noReconciler{reg, reg}, subscriber.WithLimiter(nil))
		subA := mustSubscribe(t, m, a, func([]subscriber.Instance) {})
		subB := mustSubscribe(t, m, b, func([]subscriber.Instance) {})
		<-subA.Ready()
		<-subB.Ready()
		synctest.Wait()
		var mu sync.Mutex
		calls := map[string]int{}
		reg.OnSubscribe(func(k subscriber.Key) {
			mu.Lock()
			calls[k.Service]++
			n := calls[k.Service]
			mu.Unlock()
			if k.Service == "a" && n == 1 {
				// a's Refresh runs first on the scheduler; b's waits
				// behind it while the connection flaps.
				reg.SetDown(true)
				reg.SetDown(false)
				time.Sleep(time.Second)
			}
		})
		subA.Refresh()
		subB.Refresh()
		synctest.Wait()
		for _, s := range []*subscriber.Subscription{subA, subB} {
			if st := s.Status(); st.Attempts < 0 {
				t.Fatalf("%v: Attempts %d", st.Key, st.Attempts)
			}
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		st := subB.Status()
		if st.State != subscriber.StateSubscribed || st.TotalAttempts != 1+calls["b"] || st.Attempts < 1 || st.Attempts > calls["b"] {
			t.Fatalf("b: %+v after %d calls since the Refresh", st, calls["b"])
		}
	})
}

// blockingUnsubscribe is a Registry whose Unsubscribe blocks until release is
// closed.
type blockingUnsubscribe struct {
	*subscribertest.Registry
	entered chan struct{}
	release chan struct{}
}

func (r *blockingUnsubscribe) Unsubscribe(ctx context.Context, k subscriber.Key, s subscriber.Sink) error {
	close(r.entered)
	<-r.release
	return r.Registry.Unsubscribe(ctx, k, s)
}

// Close waits for a subscription an Unsubscribe call began stopping: once
// Close returns, every subscription is done and no Registry.Unsubscribe
// call of the Manager is in progress. Close returned while the other
// caller's Registry.Unsubscribe still ran.
func TestBreakCloseWaitsForAConcurrentUnsubscribe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := &blockingUnsubscribe{Registry: subscribertest.New(), entered: make(chan struct{}), release: make(chan struct{})}
		m, err := subscriber.New(reg)
		if err != nil {
			t.Fatal(err)
		}
		s := mustSubscribe(t, m, orders, func([]subscriber.Instance) {})
		<-s.Ready()
		go s.Unsubscribe()
		<-reg.entered // the registry's Unsubscribe is in progress
		closed := make(chan struct{})
		go func() {
			m.Close()
			close(closed)
		}()
		time.Sleep(time.Second)
		synctest.Wait()
		select {
		case <-closed:
			t.Errorf("Close returned while the subscription's Registry.Unsubscribe was in progress (done: %v)", isClosed(s.Done()))
		default:
		}
		close(reg.release)
		<-closed
		if !isClosed(s.Done()) {
			t.Fatal("Close returned before the subscription was done")
		}
	})
}

// A shared limiter whose burst is set to 0 after New grants no token: the
// subscription's retries wait (deferred) and never end it, and nothing is
// sent past the limiter. They were sent without a token, and the first
// failure after it stopped the subscription for good (ErrExhausted).
func TestBreakLimiterBurstZeroLaterNeitherBypassedNorFatal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := subscribertest.New()
		ok := outage(reg)
		lim := rate.NewLimiter(10, 1)
		m := newManager(t, reg, subscriber.WithLimiter(lim))
		s := mustSubscribe(t, m, orders, func([]subscriber.Instance) {})
		time.Sleep(10 * time.Second)
		synctest.Wait()
		lim.SetBurst(0)
		before := reg.Stats().Subscribes
		time.Sleep(5 * time.Minute)
		synctest.Wait()
		if st := s.Status(); st.State == subscriber.StateStopped {
			t.Fatalf("stopped by the limiter: %v", st.LastErr)
		}
		if sent := reg.Stats().Subscribes - before; sent != 0 {
			t.Errorf("%d Subscribe calls through a limiter that grants no token", sent)
		}
		lim.SetBurst(1)
		ok()
		time.Sleep(time.Minute)
		synctest.Wait()
		if st := s.Status(); st.State != subscriber.StateSubscribed {
			t.Fatalf("after the limiter grants again: %+v", st)
		}
	})
}

// The same for Lookups: a Refresh or a reconciliation through a limiter
// that grants no token sends nothing. It was sent without a token.
func TestBreakLimiterBurstZeroLaterLookups(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := subscribertest.New()
		reg.Set(orders, inst("10.0.0.1"))
		lim := rate.NewLimiter(10, 1)
		m := newManager(t, reg, subscriber.WithLimiter(lim), subscriber.WithReconcile(time.Second))
		s := mustSubscribe(t, m, orders, func([]subscriber.Instance) {})
		<-s.Ready()
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if reg.Stats().Lookups == 0 {
			t.Fatal("no reconciliation Lookup")
		}
		lim.SetBurst(0)
		before := reg.Stats().Lookups
		s.Refresh()
		time.Sleep(time.Minute)
		synctest.Wait()
		if n := reg.Stats().Lookups - before; n != 0 {
			t.Errorf("%d Lookups through a limiter that grants no token", n)
		}
		lim.SetBurst(1)
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if reg.Stats().Lookups == before {
			t.Error("no Lookup once the limiter grants again")
		}
	})
}
