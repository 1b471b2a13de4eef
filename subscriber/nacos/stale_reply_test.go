package nacos_test

import (
	"slices"
	"testing"

	"github.com/nacos-group/nacos-sdk-go/v2/model"

	"github.com/rebound-go/rebound/subscriber"
)

// TestStaleReplyAfterNewerPush: nacos-sdk-go v2.3.2 stores a reply
// without a lock, so a reply that read the cache before a newer push was
// processed (the start-up redo's, a re-query's) is stored after it and
// runs the callbacks with its older list. The sink never gets a list older
// than one it already has: the subscriber keeps the newest.
func TestStaleReplyAfterNewerPush(t *testing.T) {
	for _, tc := range []struct {
		name       string
		first      bool // the reply read the cache before the first list was stored (the start-up redo racing the first Subscribe)
		storeFirst bool // the reply is stored before the push, its callbacks run after the push's
	}{
		{"stored after the push", false, false},
		{"stored after the push, cache empty when read", true, false},
		{"callbacks after the push's", false, true},
		{"callbacks after the push's, cache empty when read", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeSDK()
			r := newRegistry(t, f)
			var s sink
			if err := r.Subscribe(ctx, subscriber.Key{Service: "orders"}, &s); err != nil {
				t.Fatal(err)
			}
			// A change whose push is still on its way; a reply built now
			// is processed late, around the push of the next change.
			f.server[ordersKey] = []model.Instance{host("10.0.0.1")}
			late := f.reply(ordersKey)
			if tc.first {
				f.mu.Lock()
				delete(f.cache, ordersKey)
				f.mu.Unlock()
			}
			push := func() { f.setServer(ordersKey, host("10.0.0.1"), host("10.0.0.2")) }
			if tc.storeFirst {
				f.processLate(ordersKey, late, func() {}, push)
			} else {
				f.processLate(ordersKey, late, push, func() {})
			}
			want := [][]string{{}, {"10.0.0.1", "10.0.0.2"}}
			if got := s.ips(); !slices.EqualFunc(got, want, slices.Equal) {
				t.Fatalf("updates %v, want %v (never a list older than one delivered)", got, want)
			}
			if f.numSent(ordersKey) != 1 {
				t.Fatalf("%d subscribe requests, want 1", f.numSent(ordersKey))
			}
		})
	}
}
