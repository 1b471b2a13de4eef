package nacos_test

import (
	"slices"
	"testing"

	"github.com/nacos-group/nacos-sdk-go/v2/model"

	"github.com/rebound-go/rebound/subscriber"
)

// TestStaleReplyStoredBetweenPushAndCallbacks: a reply that read the
// cache before a newer push is stored after the push's list and before
// the push's callbacks run (the SDK stores and calls back without a
// lock). The sink never gets a list older than one it already has.
func TestStaleReplyStoredBetweenPushAndCallbacks(t *testing.T) {
	f := newFakeSDK()
	r := newRegistry(t, f)
	var s sink
	if err := r.Subscribe(ctx, subscriber.Key{Service: "orders"}, &s); err != nil {
		t.Fatal(err)
	}
	f.server[ordersKey] = []model.Instance{host("10.0.0.1")}
	late := f.reply(ordersKey)
	f.server[ordersKey] = []model.Instance{host("10.0.0.1"), host("10.0.0.2")}
	push := f.reply(ordersKey)
	stored, release, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	f.processLate(ordersKey, late, func() {
		go func() {
			defer close(done)
			f.processLate(ordersKey, push, func() {}, func() { close(stored); <-release })
		}()
		<-stored
	}, func() { close(release); <-done })
	got := s.ips()
	for i := 1; i < len(got); i++ {
		if len(got[i]) < len(got[i-1]) {
			t.Fatalf("updates %v: the older list [10.0.0.1] after the newer one", got)
		}
	}
}

// TestEmptyListAfterNonEmpty: a change to an empty list (cached by the
// SDK) is passed on after a non-empty one.
func TestEmptyListAfterNonEmpty(t *testing.T) {
	f := newFakeSDK()
	r := newRegistry(t, f)
	var s sink
	if err := r.Subscribe(ctx, subscriber.Key{Service: "orders"}, &s); err != nil {
		t.Fatal(err)
	}
	f.setServer(ordersKey, host("10.0.0.1"))
	f.setServer(ordersKey)
	want := [][]string{{}, {"10.0.0.1"}, {}}
	if got := s.ips(); !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("updates %v, want %v", got, want)
	}
}

// TestTwoSinksStaleReply: two sinks on one key both get a newer push and
// neither gets the older reply run after it.
func TestTwoSinksStaleReply(t *testing.T) {
	f := newFakeSDK()
	r := newRegistry(t, f)
	var a, b sink
	for _, s := range []*sink{&a, &b} {
		if err := r.Subscribe(ctx, subscriber.Key{Service: "orders"}, s); err != nil {
			t.Fatal(err)
		}
	}
	f.server[ordersKey] = []model.Instance{host("10.0.0.1")}
	late := f.reply(ordersKey)
	f.processLate(ordersKey, late, func() {}, func() { f.setServer(ordersKey, host("10.0.0.1"), host("10.0.0.2")) })
	for name, s := range map[string]*sink{"first": &a, "second": &b} {
		got := s.ips()
		if len(got) == 0 || !slices.Equal(got[len(got)-1], []string{"10.0.0.1", "10.0.0.2"}) {
			t.Errorf("%s sink: updates %v, want the newer list last", name, got)
		}
	}
}

// TestResubscribeAfterUnsubscribeClockBack: after an Unsubscribe the SDK
// forgets the key's list; a new subscription whose server clock is behind
// the one passed on before (another server of the cluster) still gets its
// list and the next change.
func TestResubscribeAfterUnsubscribeClockBack(t *testing.T) {
	f := newFakeSDK()
	r := newRegistry(t, f)
	var a sink
	key := subscriber.Key{Service: "orders"}
	if err := r.Subscribe(ctx, key, &a); err != nil {
		t.Fatal(err)
	}
	f.setServer(ordersKey, host("10.0.0.1"))
	f.setServer(ordersKey, host("10.0.0.1"), host("10.0.0.2"))
	if err := r.Unsubscribe(ctx, key, &a); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	f.ref = 0
	f.mu.Unlock()
	var b sink
	if err := r.Subscribe(ctx, key, &b); err != nil {
		t.Fatal(err)
	}
	f.setServer(ordersKey, host("10.0.0.3"))
	want := [][]string{{"10.0.0.1", "10.0.0.2"}, {"10.0.0.3"}}
	if got := b.ips(); !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("updates %v, want %v", got, want)
	}
}
