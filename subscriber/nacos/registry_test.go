package nacos_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/nacos-group/nacos-sdk-go/v2/clients/naming_client"
	"github.com/nacos-group/nacos-sdk-go/v2/model"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/nacos"
)

// sink records what the adapter reports.
type sink struct {
	mu       sync.Mutex
	updates  [][]subscriber.Instance
	resubs   []error
	confirms []string
}

func (s *sink) Update(l []subscriber.Instance) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.updates = append(s.updates, l)
}

func (s *sink) Confirmed(reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.confirms = append(s.confirms, reason)
}

func (s *sink) counts() (confirms, resubs int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.confirms), len(s.resubs)
}

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
	r, err := nacos.New(f, append([]nacos.Option{nacos.WithLogger(zaptest.NewLogger(t))}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

var ctx = context.Background()

const ordersKey = "DEFAULT_GROUP@@orders@@"

func TestNewRejectsNilClientAndBadOptions(t *testing.T) {
	for name, client := range map[string]naming_client.INamingClient{
		"nil":       nil,
		"typed nil": (*naming_client.NamingClient)(nil),
	} {
		_, err := nacos.New(client)
		var ae *rebound.ArgumentError
		if !errors.As(err, &ae) || !errors.Is(err, rebound.ErrInvalidArgument) || ae.Func != "nacos.New" || ae.Arg != "client" {
			t.Errorf("New(%s) = %v, want an *rebound.ArgumentError for client", name, err)
		}
	}
	for _, tc := range []struct {
		opt  nacos.Option
		want string
	}{
		{nacos.WithPollInterval(0, time.Second), "nacos.WithPollInterval: up must be at least 1ms; got 0s"},
		{nacos.WithPollInterval(time.Second, -1), "nacos.WithPollInterval: down must be at least 1ms; got -1ns"},
		{nacos.WithEvidenceWindow(0, time.Second), "nacos.WithEvidenceWindow: window must be positive"},
		{nacos.WithEvidenceWindow(time.Second, 0), "nacos.WithEvidenceWindow: total must be positive"},
		{nacos.WithEvidenceWindow(2*time.Second, time.Second), "nacos.WithEvidenceWindow: window must not exceed total"},
		{nacos.WithRedoGrace(time.Second), "nacos.New: opts must not hold nacos.WithRedoGrace, which configures Register only"},
		{nacos.WithPolicy(rebound.Policy{}), "nacos.New: opts must not hold nacos.WithPolicy, which configures Register only"},
	} {
		_, err := nacos.New(newFakeSDK(), tc.opt)
		if !errors.Is(err, rebound.ErrInvalidArgument) || err.Error() != tc.want {
			t.Errorf("New with a bad option = %v, want %q", err, tc.want)
		}
	}
	if _, err := nacos.New(newFakeSDK(), nil); err != nil {
		t.Errorf("New with a nil option = %v, want nil (ignored)", err)
	}
}

func TestKeyMapping(t *testing.T) {
	f := newFakeSDK()
	f.server["g1@@svc@@a,b"] = nil
	f.namespace = "dev" // the client's namespace: keys may name it or none
	r := newRegistry(t, f)
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
		{Service: "   "},
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
		if err == nil || errors.Is(err, rebound.ErrClosed) || rebound.IsPermanent(err) {
			t.Fatalf("attempt %d while disconnected: %v; want a transient error", i, err)
		}
		if err == nil || !strings.HasPrefix(err.Error(), "nacos: subscribe ") ||
			!errors.Is(err, nacos.ErrNotConnected) {
			t.Fatalf("attempt %d: %v; want the subscribe error wrapping ErrNotConnected", i, err)
		}
		if strings.Count(err.Error(), "nacos:") != 1 || strings.Contains(err.Error(), "subscriber:") {
			t.Fatalf("error text %q repeats prefixes", err)
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

// TestResubscribeReachesTheServer: when the adapter is asked again for a
// subscription the SDK believes in (cached, redo entry), a real request
// goes out.
func TestResubscribeReachesTheServer(t *testing.T) {
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
	if err := r.Subscribe(ctx, key, &s); err != nil { // the Manager's resubscription
		t.Fatal(err)
	}
	if n := f.numSent(ordersKey); n != 2 || !f.held(ordersKey) {
		t.Fatalf("%d subscribe requests reached the server (held %v), want 2 (the resubscription must be sent)", n, f.held(ordersKey))
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
	if err := r.Subscribe(ctx, key, &s); !errors.Is(err, nacos.ErrClosed) || !errors.Is(err, rebound.ErrClosed) ||
		err.Error() != "nacos: registry closed" {
		t.Fatalf("Subscribe on a closed client: %v; want ErrClosed matching rebound.ErrClosed", err)
	}
	r2 := newRegistry(t, newFakeSDK())
	if err := r2.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r2.Close(); err != nil {
		t.Fatal("second Close:", err)
	}
	if err := r2.Subscribe(ctx, key, &s); !errors.Is(err, rebound.ErrClosed) {
		t.Fatalf("Subscribe after Registry.Close: %v", err)
	}
}

func TestMonitorConnectionReportsTransitions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeSDK()
		f.setConnected(false)
		r := newRegistry(t, f, nacos.WithPollInterval(100*time.Millisecond, time.Second))
		ctx, cancel := context.WithCancel(context.Background())
		var mu sync.Mutex
		var got []bool
		done := make(chan error)
		go func() {
			done <- r.MonitorConnection(ctx, func(st bool) {
				mu.Lock()
				got = append(got, st)
				mu.Unlock()
			})
		}()
		snapshot := func() []bool {
			mu.Lock()
			defer mu.Unlock()
			return slices.Clone(got)
		}
		// Polls: every 1 s while down (t = 1, 2, ...), every 100 ms while
		// up. Changes happen between polls.
		time.Sleep(10500 * time.Millisecond)
		f.setConnected(true) // t = 10.5: seen at 11
		time.Sleep(400 * time.Millisecond)
		if g := snapshot(); !slices.Equal(g, []bool{false}) {
			t.Fatalf("before the next poll: reports %v, want [disconnected]", g)
		}
		time.Sleep(650 * time.Millisecond) // t = 11.55
		if g := snapshot(); !slices.Equal(g, []bool{false, true}) {
			t.Fatalf("after the poll: reports %v, want [disconnected connected] (no settle time)", g)
		}
		f.setConnected(false)
		time.Sleep(100 * time.Millisecond) // t = 11.65: Disconnected at 11.6
		f.setConnected(true)
		time.Sleep(1100 * time.Millisecond) // seen at 12.6
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("MonitorConnection returned %v after cancel, want nil", err)
		}
		want := []bool{false, true, false, true}
		if !slices.Equal(got, want) {
			t.Fatalf("reports %v, want %v", got, want)
		}
		_ = r.Close()
		if err := r.MonitorConnection(context.Background(), func(bool) {}); !errors.Is(err, nacos.ErrClosed) {
			t.Fatalf("MonitorConnection after Close: %v", err)
		}
	})
}

// TestRejectionReportedAsSuccessIsAnError: nacos-sdk-go returns nil for a
// subscribe the server rejected in the handler's own response type (TPS
// control); the adapter notices and returns ErrRejected, and the next
// attempt sends one request, adding no callback.
func TestRejectionReportedAsSuccessIsAnError(t *testing.T) {
	f := newFakeSDK()
	f.server[ordersKey] = []model.Instance{host("10.0.0.1")}
	r := newRegistry(t, f)
	key := subscriber.Key{Service: "orders"}
	var s sink
	f.mu.Lock()
	f.rejectNext = 2 // the Subscribe, and the GetService that checks it
	f.mu.Unlock()
	err := r.Subscribe(ctx, key, &s)
	if !errors.Is(err, nacos.ErrRejected) || !strings.HasPrefix(err.Error(), "nacos: subscribe ") || rebound.IsPermanent(err) {
		t.Fatalf("Subscribe while rejected = %v, want a transient subscribe error wrapping ErrRejected", err)
	}
	if f.held(ordersKey) || len(s.ips()) != 0 {
		t.Fatalf("held %v, updates %v after a rejection", f.held(ordersKey), s.ips())
	}
	sent := f.numSent(ordersKey)
	if err := r.Subscribe(ctx, key, &s); err != nil {
		t.Fatal(err)
	}
	if n := f.numSent(ordersKey) - sent; n != 1 || !f.held(ordersKey) {
		t.Fatalf("the retry sent %d requests (held %v), want 1", n, f.held(ordersKey))
	}
	if n := f.numCallbacks(ordersKey); n != 1 {
		t.Fatalf("SDK holds %d callbacks, want 1", n)
	}
	if got := s.ips(); len(got) != 1 || !slices.Equal(got[0], []string{"10.0.0.1"}) {
		t.Fatalf("updates %v, want the list once", got)
	}
}

// reconnectFixture runs a Manager over the adapter over the fake with n
// subscriptions, all subscribed.
type reconnectFixture struct {
	f    *fakeSDK
	m    *subscriber.Manager
	subs []*subscriber.Subscription
	keys []string
}

func newReconnectFixture(t *testing.T, n int) *reconnectFixture {
	f := newFakeSDK()
	r := newRegistry(t, f)
	m, err := subscriber.New(r, subscriber.WithLogger(zaptest.NewLogger(t)),
		subscriber.WithPolicy(rebound.Policy{Initial: 100 * time.Millisecond, Max: time.Second}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	fx := &reconnectFixture{f: f, m: m}
	for i := range n {
		svc := string(rune('a' + i))
		k := sdkKey("", svc, nil)
		f.mu.Lock()
		f.server[k] = []model.Instance{host("10.0.0.1")}
		f.mu.Unlock()
		sub, err := m.Subscribe(context.Background(), subscriber.Key{Service: svc}, func([]subscriber.Instance) {})
		if err != nil {
			t.Fatal(err)
		}
		fx.subs = append(fx.subs, sub)
		fx.keys = append(fx.keys, k)
	}
	for _, sub := range fx.subs {
		<-sub.Ready()
	}
	time.Sleep(time.Second)
	synctest.Wait()
	return fx
}

func (fx *reconnectFixture) allSubscribed() bool {
	for _, sub := range fx.subs {
		if sub.Status().State != subscriber.StateSubscribed {
			return false
		}
	}
	return true
}

// TestCleanReconnectSendsNothingMore: the SDK's redo worked for every
// subscription; the adapter confirms each from the SDK's cache and the
// Manager sends nothing.
func TestCleanReconnectSendsNothingMore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fx := newReconnectFixture(t, 5)
		fx.f.setConnected(false)
		time.Sleep(1500 * time.Millisecond) // seen within the 1 s down poll
		synctest.Wait()
		if fx.allSubscribed() {
			t.Fatal("still subscribed after the disconnection")
		}
		before := fx.f.totalRequests()
		fx.f.setConnected(true)
		fx.f.redo() // the SDK's redo, from its own goroutine, as the connection comes back
		time.Sleep(300 * time.Millisecond)
		synctest.Wait()
		if !fx.allSubscribed() {
			t.Fatal("not every subscription confirmed 300 ms after the redo")
		}
		if n := fx.f.totalRequests() - before; n != 5 {
			t.Fatalf("%d requests after the reconnect, want 5 (the redo's alone)", n)
		}
		for _, sub := range fx.subs {
			if st := sub.Status(); st.ConfirmReason == "" || st.ConfirmedAt.IsZero() {
				t.Fatalf("status %+v, want a confirmation reason", st)
			}
		}
		time.Sleep(20 * time.Second) // nothing else happens later either
		synctest.Wait()
		if n := fx.f.totalRequests() - before; n != 5 {
			t.Fatalf("%d requests 20 s after the reconnect, want 5", n)
		}
	})
}

// TestRejectedRedoIsRepaired: the server rejected two subscriptions of the
// redo (TPS control, reported as success by the SDK): only those two are
// handed back and subscribed again; the others cost nothing.
func TestRejectedRedoIsRepaired(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fx := newReconnectFixture(t, 5)
		fx.f.setConnected(false)
		time.Sleep(1500 * time.Millisecond)
		synctest.Wait()
		before := fx.f.totalRequests()
		fx.f.mu.Lock()
		fx.f.reject[fx.keys[1]], fx.f.reject[fx.keys[3]] = true, true
		fx.f.mu.Unlock()
		fx.f.setConnected(true)
		fx.f.redo()
		time.Sleep(time.Second)
		synctest.Wait()
		for i, sub := range fx.subs {
			want := i != 1 && i != 3
			if got := sub.Status().State == subscriber.StateSubscribed; got != want {
				t.Fatalf("subscription %d subscribed %v, want %v", i, got, want)
			}
		}
		fx.f.mu.Lock()
		clear(fx.f.reject) // TPS control lets them through now
		fx.f.mu.Unlock()
		time.Sleep(5 * time.Second) // window (2 s) + the Manager's jittered retry
		synctest.Wait()
		if !fx.allSubscribed() {
			t.Fatal("the rejected subscriptions were not repaired")
		}
		for _, k := range fx.keys {
			if !fx.f.held(k) {
				t.Fatalf("server does not hold %s", k)
			}
		}
		// 5 redo requests (2 rejected), then per repaired subscription one
		// unsubscribe and one subscribe.
		if n := fx.f.totalRequests() - before; n != 5+2*2 {
			t.Fatalf("%d requests after the reconnect, want 9", n)
		}
	})
}

// TestHandedBackButLateEvidenceSendsNothing: a subscription handed back
// for want of evidence whose evidence arrives before the Manager's retry
// (a slow redo) costs no request.
func TestHandedBackButLateEvidenceSendsNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeSDK()
		f.server[ordersKey] = []model.Instance{host("10.0.0.1")}
		r := newRegistry(t, f)
		key := subscriber.Key{Service: "orders"}
		var s sink
		if err := r.Subscribe(ctx, key, &s); err != nil {
			t.Fatal(err)
		}
		mctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- r.MonitorConnection(mctx, func(bool) {}) }()
		f.setConnected(false)
		time.Sleep(1500 * time.Millisecond)
		f.mu.Lock()
		f.reject[ordersKey] = true
		f.mu.Unlock()
		f.setConnected(true)
		f.redo() // rejected
		time.Sleep(4 * time.Second)
		if confirms, resubs := s.counts(); confirms != 0 || resubs != 1 || !errors.Is(s.resubs[0], nacos.ErrNoEvidence) {
			t.Fatalf("confirms %d, resubs %d (%v), want the subscription handed back with ErrNoEvidence", confirms, resubs, s.resubs)
		}
		f.mu.Lock()
		clear(f.reject)
		f.mu.Unlock()
		f.redo() // a late redo gets through
		before := f.totalRequests()
		if err := r.Subscribe(ctx, key, &s); err != nil {
			t.Fatal(err)
		}
		if n := f.totalRequests() - before; n != 0 {
			t.Fatalf("the retry sent %d requests, want 0 (the evidence arrived meanwhile)", n)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}

// TestSameListTwiceFromTheSDKIsPassedOnce: nacos-sdk-go v2.3.2 applies a
// subscribe reply and a push to its cache without a lock, so both can run
// the callbacks with the same list; the adapter passes it on once.
func TestSameListTwiceFromTheSDKIsPassedOnce(t *testing.T) {
	f := newFakeSDK()
	f.server[ordersKey] = []model.Instance{host("10.0.0.1")}
	r := newRegistry(t, f)
	var s sink
	if err := r.Subscribe(ctx, subscriber.Key{Service: "orders"}, &s); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	cbs := slices.Clone(f.callbacks[ordersKey])
	f.mu.Unlock()
	if len(cbs) != 1 {
		t.Fatalf("SDK holds %d callbacks, want 1", len(cbs))
	}
	both := []model.Instance{host("10.0.0.2"), host("10.0.0.1")}
	// Each as the SDK runs it: stored in its cache (with a newer
	// lastRefTime) first.
	for _, hosts := range [][]model.Instance{slices.Clone(both), {both[1], both[0]}} { // the same list, in another order
		f.mu.Lock()
		f.ref++
		f.cache[ordersKey] = model.Service{Name: "orders", Hosts: hosts, LastRefTime: f.ref}
		f.mu.Unlock()
		(*cbs[0])(hosts, nil)
	}
	if got, want := s.ips(), [][]string{{"10.0.0.1"}, {"10.0.0.2", "10.0.0.1"}}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("updates %v, want %v (the repeated list passed once)", got, want)
	}
}

// MonitorConnection finds out that the SDK client was closed (the Manager
// sends no Subscribe while the connection is down, so no Subscribe can),
// returns ErrClosed, and Unsubscribe then calls the closed SDK no more.
func TestMonitorConnectionFindsClosedClient(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeSDK()
		r := newRegistry(t, f)
		key := subscriber.Key{Service: "orders"}
		var s sink
		if err := r.Subscribe(ctx, key, &s); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- r.MonitorConnection(context.Background(), func(bool) {}) }()
		time.Sleep(time.Second)
		f.CloseClient()
		time.Sleep(15 * time.Second)
		select {
		case err := <-done:
			if !errors.Is(err, nacos.ErrClosed) || !errors.Is(err, rebound.ErrClosed) {
				t.Fatalf("MonitorConnection returned %v, want ErrClosed (rebound.ErrClosed)", err)
			}
		default:
			t.Fatal("MonitorConnection still running 15 s after CloseClient")
		}
		before := f.totalRequests()
		if err := r.Unsubscribe(ctx, key, &s); !errors.Is(err, nacos.ErrClosed) {
			t.Fatalf("Unsubscribe on a closed client: %v, want ErrClosed", err)
		}
		if n := f.totalRequests() - before; n != 0 {
			t.Fatalf("Unsubscribe sent %d requests to a closed client", n)
		}
	})
}
