package nacos_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/nacos-group/nacos-sdk-go/v2/model"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/nacos"
)

// sink records what the adapter reports.
type sink struct {
	mu      sync.Mutex
	updates [][]subscriber.Instance
	resubs  []error
}

func (s *sink) Update(l []subscriber.Instance) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.updates = append(s.updates, l)
}

func (s *sink) Confirmed(string) {}

func (s *sink) Resubscribe(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.resubs = append(s.resubs, err)
}

func (s *sink) ips() [][]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out [][]string
	for _, l := range s.updates {
		ips := []string{}
		for _, in := range l {
			ips = append(ips, in.IP)
		}
		out = append(out, ips)
	}
	return out
}

func newRegistry(t *testing.T, f *fakeSDK, opts ...nacos.Option) *nacos.Registry {
	t.Helper()
	r, err := nacos.NewRegistry(f, append([]nacos.Option{nacos.WithLogger(zaptest.NewLogger(t))}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

var ctx = context.Background()

const ordersKey = "DEFAULT_GROUP@@orders@@"

func TestNewRegistryRejectsNilClient(t *testing.T) {
	if _, err := nacos.NewRegistry(nil); !errors.Is(err, nacos.ErrNilClient) {
		t.Fatalf("NewRegistry(nil) = %v, want ErrNilClient", err)
	}
}

func TestKeyMapping(t *testing.T) {
	f := newFakeSDK()
	f.server["g1@@svc@@a,b"] = nil
	r := newRegistry(t, f, nacos.WithNamespace("dev"))
	var s sink
	if err := r.Subscribe(ctx, subscriber.Key{Namespace: "dev", Group: "g1", Service: "svc", Clusters: []string{"b", "a", "b"}}, &s); err != nil {
		t.Fatal(err)
	}
	if f.numSent("g1@@svc@@a,b") != 1 {
		t.Fatalf("subscribe requests by key: %v; want clusters sorted and de-duplicated", f.sent)
	}
	var s2 sink
	if err := r.Subscribe(ctx, subscriber.Key{Service: "svc"}, &s2); err != nil || f.numSent("DEFAULT_GROUP@@svc@@") != 1 {
		t.Fatalf("empty group: err %v, sent %v", err, f.sent)
	}
	for _, k := range []subscriber.Key{
		{Namespace: "prod", Service: "svc"},
		{Service: "a@@b"},
		{Service: "svc", Clusters: []string{"x,y"}},
	} {
		err := r.Subscribe(ctx, k, &sink{})
		if !errors.Is(err, nacos.ErrInvalidKey) || !rebound.IsPermanent(err) {
			t.Errorf("Subscribe(%v) = %v; want a permanent ErrInvalidKey", k, err)
		}
	}
}

func TestOneCallbackAcrossFailedAttempts(t *testing.T) {
	f := newFakeSDK()
	f.server[ordersKey] = nil
	f.setConnected(false)
	r := newRegistry(t, f)
	var s sink
	key := subscriber.Key{Service: "orders"}
	for i := range 10 {
		err := r.Subscribe(ctx, key, &s)
		if err == nil || errors.Is(err, subscriber.ErrRegistryClosed) || rebound.IsPermanent(err) {
			t.Fatalf("attempt %d while disconnected: %v; want a transient error", i, err)
		}
		var ne *nacos.Error
		if !errors.As(err, &ne) || ne.Op != "subscribe" {
			t.Fatalf("attempt %d: %v; want a *nacos.Error", i, err)
		}
		// While disconnected the adapter calls the SDK at most once (a
		// probe for a closed client), never adding a second callback.
		if n := f.numCallbacks(ordersKey); n > 1 {
			t.Fatalf("after %d failed attempts the SDK holds %d callbacks, want at most 1", i+1, n)
		}
	}
	f.setConnected(true)
	f.mu.Lock()
	f.failNext = 3 // server errors
	f.mu.Unlock()
	for range 3 {
		if err := r.Subscribe(ctx, key, &s); err == nil {
			t.Fatal("want the injected server error")
		}
	}
	if err := r.Subscribe(ctx, key, &s); err != nil {
		t.Fatal(err)
	}
	if n := f.numCallbacks(ordersKey); n != 1 {
		t.Fatalf("SDK holds %d callbacks, want 1", n)
	}
	f.setServer(ordersKey, host("10.0.0.1"))
	f.setServer(ordersKey, host("10.0.0.1"), host("10.0.0.2"))
	if got, want := s.ips(), [][]string{{}, {"10.0.0.1"}, {"10.0.0.1", "10.0.0.2"}}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("updates %v, want %v (each change once)", got, want)
	}
}

func TestConfirmationReachesTheServer(t *testing.T) {
	f := newFakeSDK()
	r := newRegistry(t, f)
	var s sink
	key := subscriber.Key{Service: "orders"}
	if err := r.Subscribe(ctx, key, &s); err != nil {
		t.Fatal(err)
	}
	f.restartSilently() // the server forgot us; the SDK still thinks it is subscribed
	f.setServer(ordersKey, host("10.0.0.9"))
	if len(s.ips()) != 1 {
		t.Fatalf("push reached a forgotten subscription: %v", s.ips())
	}
	if err := r.Subscribe(ctx, key, &s); err != nil { // the Manager's confirmation
		t.Fatal(err)
	}
	if n := f.numSent(ordersKey); n != 2 {
		t.Fatalf("%d subscribe requests reached the server, want 2 (the confirmation must be sent)", n)
	}
	if got, want := s.ips(), [][]string{{}, {"10.0.0.9"}}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("updates %v, want %v", got, want)
	}
	if n := f.numCallbacks(ordersKey); n != 1 {
		t.Fatalf("SDK holds %d callbacks, want 1", n)
	}
}

func TestSharedKey(t *testing.T) {
	f := newFakeSDK()
	f.server[ordersKey] = nil
	f.setServer(ordersKey, host("10.0.0.1"))
	r := newRegistry(t, f)
	key := subscriber.Key{Service: "orders"}
	var a, b sink
	if err := r.Subscribe(ctx, key, &a); err != nil {
		t.Fatal(err)
	}
	// The SDK has the key cached and sends nothing for b: b still gets the list.
	if err := r.Subscribe(ctx, key, &b); err != nil {
		t.Fatal(err)
	}
	if got := b.ips(); len(got) != 1 || !slices.Equal(got[0], []string{"10.0.0.1"}) {
		t.Fatalf("second subscription of a key got %v, want the cached list", got)
	}
	if n := f.numCallbacks(ordersKey); n != 2 {
		t.Fatalf("SDK holds %d callbacks, want 2 (one per subscription)", n)
	}
	if err := r.Unsubscribe(ctx, key, &a); err != nil {
		t.Fatal(err)
	}
	if n := f.numCallbacks(ordersKey); n != 1 {
		t.Fatalf("after Unsubscribe the SDK holds %d callbacks, want 1", n)
	}
	b.mu.Lock()
	resubs := len(b.resubs)
	b.mu.Unlock()
	if resubs != 1 {
		t.Fatalf("the other subscription of the key was asked to resubscribe %d times, want 1", resubs)
	}
	f.setServer(ordersKey, host("10.0.0.2"))
	if got := len(a.ips()); got != 1 {
		t.Fatalf("unsubscribed sink got %d updates, want 1", got)
	}
}

func TestClosedClientIsPermanent(t *testing.T) {
	f := newFakeSDK()
	r := newRegistry(t, f)
	key := subscriber.Key{Service: "orders"}
	var s sink
	if err := r.Subscribe(ctx, key, &s); err != nil {
		t.Fatal(err)
	}
	f.CloseClient()
	if err := r.Subscribe(ctx, key, &s); !errors.Is(err, nacos.ErrClosed) || !errors.Is(err, subscriber.ErrRegistryClosed) {
		t.Fatalf("Subscribe on a closed client: %v; want ErrClosed wrapping subscriber.ErrRegistryClosed", err)
	}
	r2 := newRegistry(t, newFakeSDK())
	r2.Close()
	if err := r2.Subscribe(ctx, key, &s); !errors.Is(err, subscriber.ErrRegistryClosed) {
		t.Fatalf("Subscribe after Registry.Close: %v", err)
	}
}

func TestMonitorConnectionReportsTransitions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeSDK()
		f.setConnected(false)
		r := newRegistry(t, f, nacos.WithPollInterval(100*time.Millisecond, time.Second), nacos.WithSettle(500*time.Millisecond))
		ctx, cancel := context.WithCancel(context.Background())
		var mu sync.Mutex
		var got []subscriber.ConnState
		done := make(chan error)
		go func() {
			done <- r.MonitorConnection(ctx, func(st subscriber.ConnState) {
				mu.Lock()
				got = append(got, st)
				mu.Unlock()
			})
		}()
		snapshot := func() []subscriber.ConnState {
			mu.Lock()
			defer mu.Unlock()
			return slices.Clone(got)
		}
		// Polls: every 1 s while down (t = 1, 2, ...), every 100 ms while
		// up or settling. Changes happen between polls.
		// Polls: every 1 s while down (t = 1, 2, ...), every 100 ms while
		// up or settling; the settle time is drawn from [500ms, 1s].
		// Changes happen between polls.
		time.Sleep(10500 * time.Millisecond)
		f.setConnected(true)               // t = 10.5
		time.Sleep(950 * time.Millisecond) // t = 11.45: seen at 11, settling until 11.5 at least
		if g := snapshot(); !slices.Equal(g, []subscriber.ConnState{subscriber.Disconnected}) {
			t.Fatalf("before the settle time: reports %v, want [disconnected]", g)
		}
		time.Sleep(600 * time.Millisecond) // t = 12.05: Connected by 12.0
		f.setConnected(false)
		time.Sleep(100 * time.Millisecond) // t = 12.15: Disconnected at 12.1
		f.setConnected(true)
		time.Sleep(2100 * time.Millisecond) // t = 14.25: seen at 13.1, Connected by 14.1
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("MonitorConnection returned %v after cancel, want nil", err)
		}
		want := []subscriber.ConnState{subscriber.Disconnected, subscriber.Connected, subscriber.Disconnected, subscriber.Connected}
		if !slices.Equal(got, want) {
			t.Fatalf("reports %v, want %v", got, want)
		}
		r.Close()
		if err := r.MonitorConnection(context.Background(), func(subscriber.ConnState) {}); !errors.Is(err, nacos.ErrClosed) {
			t.Fatalf("MonitorConnection after Close: %v", err)
		}
	})
}

// The Manager over the adapter over the SDK fake: many failures, one
// delivery per change, and a silent server restart repaired by the
// confirmation after a reconnect.
func TestManagerOverAdapter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeSDK()
		f.server[ordersKey] = []model.Instance{host("10.0.0.1")}
		f.setConnected(false)
		r := newRegistry(t, f)
		m, err := subscriber.New(r, subscriber.WithLogger(zaptest.NewLogger(t)),
			subscriber.WithPolicy(rebound.Policy{Initial: 10 * time.Millisecond, Max: 100 * time.Millisecond}))
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		var mu sync.Mutex
		var calls [][]string
		sub, err := m.Subscribe(context.Background(), subscriber.Key{Service: "orders"}, func(l []subscriber.Instance) {
			ips := []string{}
			for _, in := range l {
				ips = append(ips, in.IP)
			}
			mu.Lock()
			calls = append(calls, ips)
			mu.Unlock()
		})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Second)
		if st := sub.Status(); st.State != subscriber.StateRetrying || st.Attempts < 20 {
			t.Fatalf("status while disconnected: %+v", st)
		}
		f.setConnected(true)
		<-sub.Ready()
		synctest.Wait()
		f.setServer(ordersKey, host("10.0.0.1"), host("10.0.0.2"))
		synctest.Wait()
		if n := f.numCallbacks(ordersKey); n != 1 {
			t.Fatalf("SDK holds %d callbacks, want 1", n)
		}
		// A restart the SDK does not repair: the monitor sees the
		// disconnect and the reconnect, and the Manager confirms.
		f.setConnected(false)
		time.Sleep(time.Second)
		f.restartSilently()
		f.setConnected(true)
		// Seen within the 1 s down poll, Connected after a settle time of
		// at most 2 s, then confirmed.
		time.Sleep(4 * time.Second)
		synctest.Wait()
		f.setServer(ordersKey, host("10.0.0.3"))
		synctest.Wait()
		mu.Lock()
		got := slices.Clone(calls)
		mu.Unlock()
		want := [][]string{{"10.0.0.1"}, {"10.0.0.1", "10.0.0.2"}, {"10.0.0.3"}}
		if !slices.EqualFunc(got, want, slices.Equal) {
			t.Fatalf("listener calls %v, want %v", got, want)
		}
	})
}
