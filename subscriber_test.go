package rebound_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/cluster"
	"github.com/rebound-go/rebound/failback"
	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/subscribertest"
)

// TestStory is rebound's whole story in one test, on the fake clock
// (testing/synctest): a subscriber.Manager over the in-memory registry
// feeds a cluster.RegistryDirectory, and a failback invoker sends
// fire-and-forget calls through it. The registry goes down while the only
// provider crashes, and restarts empty; a new provider registers on the
// restarted registry. Every call is delivered once, none is lost; the
// listeners never see an empty list while the providers re-register; and a
// service that really became empty is seen empty when the hold ends (the
// price of the hold, docs/skeptic.md).
func TestStory(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		notify := subscriber.Key{Service: "notify"} // the calls go here
		audit := subscriber.Key{Service: "audit"}   // its provider does not come back
		reg := subscribertest.New()
		reg.Set(notify, subscribertest.Instance("10.0.0.1", 8080))
		reg.Set(audit, subscribertest.Instance("10.0.0.9", 8080))

		m, err := subscriber.New(reg) // the defaults: 1 s doubling to 30 s, full jitter; a 30 s empty-list hold
		if err != nil {
			t.Fatal(err)
		}
		// Teardown, in order: the failback invoker (Shutdown at the end;
		// Close if the test stops early), the Manager, the directory.
		var fb *failback.Invoker
		var dir *cluster.RegistryDirectory
		defer func() {
			if fb != nil {
				fb.Close()
			}
			m.Close()
			if dir != nil {
				dir.Close()
			}
		}()

		// The providers: each address delivers what it is sent, unless it
		// is down (a crashed process: connection refused).
		net := &network{down: map[string]bool{}}
		dir, err = cluster.NewRegistryDirectory(func(in subscriber.Instance) (cluster.Invoker, error) {
			return &provider{net: net, addr: addrOf(in)}, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		var lists listRecorder // every list the directory's subscription delivered
		sub, err := m.Subscribe(ctx, notify, func(l []subscriber.Instance) { lists.add(l); dir.Update(l) })
		if err != nil {
			t.Fatal(err)
		}
		var auditLists listRecorder
		auditSub, err := m.Subscribe(ctx, audit, auditLists.add)
		if err != nil {
			t.Fatal(err)
		}
		if err := dir.WaitReady(ctx); err != nil {
			t.Fatal(err)
		}
		// Both subscriptions have their first list before the outage (audit's
		// could still be on its way when notify's arrived).
		synctest.Wait()
		if got := auditLists.addrs(); len(got) != 1 || len(got[0]) != 1 {
			t.Fatalf("before the outage audit's listener got %v, want its provider", got)
		}
		fb, err = failback.New(dir) // the default: 3 retries, 5 to 60 s apart
		if err != nil {
			t.Fatal(err)
		}
		send := func(msg string) {
			t.Helper()
			if _, err := fb.Invoke(ctx, &cluster.Invocation{Method: "Notify", Args: []any{msg}}); err != nil {
				t.Fatalf("Invoke(%q) = %v, want nil (delivered or queued)", msg, err)
			}
		}

		// Steady state: delivered at once.
		send("m1")
		if got := net.deliveredTo("10.0.0.1:8080"); !slices.Equal(got, []string{"m1"}) {
			t.Fatalf("before the outage 10.0.0.1 got %v, want [m1]", got)
		}

		// The registry goes down and the provider crashes with it. The
		// calls made now fail their first attempt and are queued.
		reg.SetDown(true)
		net.setDown("10.0.0.1:8080", true)
		send("m2")
		send("m3")
		if st := fb.Stats(); st.Queued != 2 {
			t.Fatalf("during the outage %+v, want the 2 calls queued", st)
		}
		time.Sleep(10 * time.Second)

		// The registry restarts empty: the providers have not registered
		// yet. The listeners keep their last lists (held, not emptied).
		reg.Restart()
		reg.Set(notify)
		reg.Set(audit)
		reg.SetDown(false)
		restart := time.Now()
		synctest.Wait()
		if st := sub.Status(); st.State != subscriber.StateHeld {
			t.Fatalf("after the restart: %+v, want the empty list held", st)
		}
		held := auditSub.Status()
		if held.State != subscriber.StateHeld {
			t.Fatalf("audit after the restart: %+v, want the empty list held", held)
		}

		// A new provider registers on the restarted registry, 2 s later;
		// the queued calls are retried through the directory and reach it.
		time.Sleep(2 * time.Second)
		net.setDown("10.0.0.2:8080", false)
		reg.Set(notify, subscribertest.Instance("10.0.0.2", 8080))
		synctest.Wait()
		if st := sub.Status(); st.State != subscriber.StateSubscribed || st.LastErr != nil {
			t.Fatalf("after the provider registered: %+v, want subscribed", st)
		}
		time.Sleep(2 * time.Minute) // longer than failback's longest retry schedule
		synctest.Wait()

		// Nothing lost, nothing twice.
		delivered := append(net.deliveredTo("10.0.0.1:8080"), net.deliveredTo("10.0.0.2:8080")...)
		slices.Sort(delivered)
		if !slices.Equal(delivered, []string{"m1", "m2", "m3"}) {
			t.Fatalf("delivered %v, want m1, m2 and m3 once each", delivered)
		}
		if st := fb.Stats(); st.Succeeded != 2 || st.GaveUp != 0 || st.Queued != 0 || st.InFlight != 0 || dropped(st) != 0 {
			t.Fatalf("failback %+v, want 2 calls delivered by a retry, none given up or dropped", st)
		}
		// The directory's listener never saw an empty list.
		if got, want := lists.addrs(), [][]string{{"10.0.0.1:8080"}, {"10.0.0.2:8080"}}; !slices.EqualFunc(got, want, slices.Equal) {
			t.Fatalf("notify's listener got %v, want %v (no empty list)", got, want)
		}
		// audit really is empty now: its listener learns it when the hold
		// ends, 30 s after the subscription was confirmed again (HeldUntil).
		got, at := auditLists.last()
		if len(got) != 0 || len(auditLists.addrs()) != 2 {
			t.Fatalf("audit's listener got %v, want its provider, then an empty list", auditLists.addrs())
		}
		if d := at.Sub(held.HeldUntil); d < 0 || d > 320*time.Millisecond { // the scheduler fires at most 320 ms late
			t.Fatalf("audit's empty list reached its listener %v after HeldUntil (%v), want at it", d, held.HeldUntil)
		}
		const defaultHold = 30 * time.Second // WithEmptyListHold's default
		late := at.Sub(restart)
		if late < defaultHold || late > defaultHold+5*time.Second {
			t.Fatalf("audit's empty list reached its listener %v after the restart, want the hold, %v, plus the re-confirmation", late, defaultHold)
		}
		t.Logf("a really empty service reached its listener %v after the registry restarted (WithEmptyListHold default %v)",
			late, defaultHold)

		if err := fb.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

func addrOf(in subscriber.Instance) string { return subscribertest.Addrs([]subscriber.Instance{in}) }

func dropped(st failback.Stats) (n uint64) {
	for _, v := range st.Dropped {
		n += v
	}
	return n
}

// network is the providers' side: which addresses are down, and what each
// one received.
type network struct {
	mu        sync.Mutex
	down      map[string]bool
	delivered map[string][]string
}

func (n *network) setDown(addr string, down bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.down[addr] = down
}

func (n *network) deliveredTo(addr string) []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.delivered[addr])
}

// provider is the cluster.Invoker of one address.
type provider struct {
	net  *network
	addr string
}

func (p *provider) Target() string { return p.addr }

func (p *provider) Invoke(ctx context.Context, inv *cluster.Invocation) (any, error) {
	p.net.mu.Lock()
	defer p.net.mu.Unlock()
	if p.net.down[p.addr] {
		return nil, rebound.Transient(errors.New("dial " + p.addr + ": connection refused"))
	}
	if p.net.delivered == nil {
		p.net.delivered = map[string][]string{}
	}
	p.net.delivered[p.addr] = append(p.net.delivered[p.addr], inv.Args[0].(string))
	return nil, nil
}

// listRecorder records a listener's lists and when each arrived.
type listRecorder struct {
	mu    sync.Mutex
	lists [][]string
	times []time.Time
}

func (r *listRecorder) add(l []subscriber.Instance) {
	addrs := make([]string, len(l))
	for i, in := range l {
		addrs[i] = addrOf(in)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lists = append(r.lists, addrs)
	r.times = append(r.times, time.Now())
}

func (r *listRecorder) addrs() [][]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.lists)
}

func (r *listRecorder) last() ([]string, time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.lists) == 0 {
		return nil, time.Time{}
	}
	return r.lists[len(r.lists)-1], r.times[len(r.times)-1]
}
