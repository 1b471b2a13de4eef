package subscriber_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"golang.org/x/time/rate"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/subscribertest"
)

// Under concurrent pushes, outages, Refresh, Unsubscribe, contexts ending
// and Close, each subscription's events reach the observers in order,
// none lost, none twice: its state changes chain (each From is the
// previous To, from 0 -> pending to one stopped, nothing after it), its
// attempt events are its TotalAttempts and its Delivered events its
// Deliveries. The observer calls Status, Counts and Refresh (a lock held
// around it would deadlock: synctest reports it), and another observer
// panics on every fifth event (recovered; the first still sees them all).
func TestBreakObserverOrderUnderChaos(t *testing.T) {
	for seed := range uint64(3) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const n = 30
				rng := rand.New(rand.NewPCG(seed, 7))
				reg := subscribertest.New()
				if seed%2 == 1 {
					reg.EnableRedo(nil)
				}
				var mu sync.Mutex
				evs := map[uint64][]rebound.Event{}
				var m *subscriber.Manager
				var subsMu sync.Mutex
				subs := make([]*subscriber.Subscription, n)
				record := rebound.ObserverFunc(func(e rebound.Event) {
					d, ok := e.Detail.(subscriber.SubscriptionEvent)
					if !ok {
						return
					}
					id := d.ID
					mu.Lock()
					evs[id] = append(evs[id], e)
					k := len(evs[id])
					mu.Unlock()
					if k%3 == 0 { // call back into the Manager
						m.Status()
						m.Counts()
						subsMu.Lock()
						s := subs[int(id)%n]
						subsMu.Unlock()
						if s != nil {
							s.Status()
							s.Refresh()
						}
					}
				})
				var pmu sync.Mutex
				pn := 0
				panics := rebound.ObserverFunc(func(rebound.Event) {
					pmu.Lock()
					pn++
					p := pn%5 == 0
					pmu.Unlock()
					if p {
						panic("observer")
					}
				})
				var err error
				m, err = subscriber.New(reg, subscriber.WithLimiter(rate.NewLimiter(50, 5)),
					subscriber.WithEmptyListHold(3*time.Second), subscriber.WithReconcile(time.Second),
					subscriber.WithPolicy(rebound.Policy{}, rebound.WithObserver(panics), rebound.WithObserver(record)))
				if err != nil {
					t.Fatal(err)
				}
				keys := make([]subscriber.Key, n)
				version := make([]uint64, n)
				for i := range n {
					keys[i] = subscriber.Key{Service: fmt.Sprint("svc", i)}
					ctx, cancel := context.WithCancel(context.Background())
					defer cancel()
					s, err := m.Subscribe(ctx, keys[i], func([]subscriber.Instance) {})
					if err != nil {
						t.Fatal(err)
					}
					if i%7 == 3 { // armed after Subscribe: a 0 s draw ended Subscribe's own ctx
						time.AfterFunc(time.Duration(rng.IntN(20))*time.Second, cancel)
					}
					subsMu.Lock()
					subs[i] = s
					subsMu.Unlock()
				}
				for range 300 {
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
						go subs[i].Refresh()
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
						go reg.Set(keys[i], subscriber.Instance{IP: "10.0.0.1", Port: version[i]})
					}
					time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond)
				}
				reg.SetDown(false)
				time.Sleep(time.Minute)
				synctest.Wait()
				if err := m.Close(); err != nil {
					t.Fatal(err)
				}
				synctest.Wait()
				sts := m.Status()
				if len(sts) != n {
					t.Fatalf("%d statuses after Close, want %d", len(sts), n)
				}
				mu.Lock()
				defer mu.Unlock()
				for _, st := range sts {
					es := evs[st.ID]
					var prev subscriber.State
					stopped := false
					attempts, deliveries := 0, 0
					var stopReason error
					for j, e := range es {
						if stopped {
							t.Errorf("%v: event %d (%v) after stopped", st.Key, j, e.Kind)
						}
						d := e.Detail.(subscriber.SubscriptionEvent)
						switch e.Kind {
						case rebound.EventStateChanged:
							if d.From != prev {
								t.Errorf("%v: state change %d is %v -> %v, the previous one ended in %v", st.Key, j, d.From, d.To, prev)
							}
							prev = d.To
							stopped = d.To == subscriber.StateStopped
							if stopped {
								stopReason = e.Err
							}
						case rebound.EventAttempt:
							attempts++
						case rebound.EventDelivered:
							if d.Result == "delivered" {
								deliveries++
							}
						}
					}
					if !stopped {
						t.Errorf("%v: no stopped event (%d events)", st.Key, len(es))
					}
					// A call in flight when the subscription stops counts in
					// TotalAttempts but has no event (events end at stopped):
					// possible only for a stop before Close (its context, an
					// Unsubscribe), never at Close, which comes once all is idle.
					inFlight := 0
					if !errors.Is(stopReason, subscriber.ErrManagerClosed) && st.TotalAttempts == attempts+1 {
						inFlight = 1
					}
					if attempts+inFlight != st.TotalAttempts {
						t.Errorf("%v: %d attempt events, TotalAttempts %d", st.Key, attempts, st.TotalAttempts)
						for _, e := range es {
							t.Logf("  %v %v %+v", e.Kind, e.Err, e.Detail)
						}
					}
					if deliveries != st.Deliveries {
						t.Errorf("%v: %d delivered events, Deliveries %d", st.Key, deliveries, st.Deliveries)
					}
				}
			})
		})
	}
}

// A subscription whose context ends before its first attempt is sent
// makes no Registry.Subscribe call, and its observers see no attempt,
// retry or retrying state for it (they saw "attempt, context canceled",
// "retry" and pending -> retrying: TotalAttempts 0).
func TestBreakObserverNoAttemptEventForAnUnsentAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := subscribertest.New()
		var mu sync.Mutex
		attempts := map[uint64]int{}
		var bad []string
		m, err := subscriber.New(reg, subscriber.WithPolicy(rebound.Policy{}, rebound.WithObserver(rebound.ObserverFunc(func(e rebound.Event) {
			mu.Lock()
			defer mu.Unlock()
			d, ok := e.Detail.(subscriber.SubscriptionEvent)
			if !ok {
				return
			}
			switch e.Kind {
			case rebound.EventAttempt:
				attempts[d.ID]++
			case rebound.EventRetry, rebound.EventGiveUp:
				bad = append(bad, fmt.Sprintf("%v %v %v", d.Key, e.Kind, e.Err))
			case rebound.EventStateChanged:
				if d.To == subscriber.StateRetrying {
					bad = append(bad, fmt.Sprintf("%v %v -> %v (%v)", d.Key, d.From, d.To, e.Err))
				}
			}
		}))))
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		for i := range 20 {
			ctx, cancel := context.WithCancel(context.Background())
			if _, err := m.Subscribe(ctx, subscriber.Key{Service: fmt.Sprint("svc", i)}, func([]subscriber.Instance) {}); err != nil {
				t.Fatal(err)
			}
			cancel()
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		sum := 0
		for _, st := range m.Status() {
			sum += st.TotalAttempts
			// A call sent just before its context ended counts in
			// TotalAttempts with no event: the events end at stopped.
			if n := attempts[st.ID]; n != st.TotalAttempts && n+1 != st.TotalAttempts {
				t.Errorf("%v: %d attempt events, TotalAttempts %d", st.Key, attempts[st.ID], st.TotalAttempts)
			}
		}
		if got := reg.Stats().Subscribes; got != sum {
			t.Errorf("the registry saw %d Subscribe calls, TotalAttempts add up to %d", got, sum)
		}
		for _, b := range bad {
			t.Errorf("event of a subscription that only stopped: %s", b)
		}
	})
}
