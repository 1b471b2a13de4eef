package subscriber_test

import (
	"context"
	"testing"
	"testing/synctest"

	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/subscribertest"
)

// Different subscriptions print apart, even when their names hold the
// separators; clusters in another order are the same one.
func TestKeyString(t *testing.T) {
	a := subscriber.Key{Service: "a/b/c"}
	b := subscriber.Key{Namespace: "a", Group: "b", Service: "c"}
	if a.String() == b.String() {
		t.Errorf("String(%#v) == String(%#v) == %q", a, b, a)
	}
	if got := b.String(); got != "a/b/c" {
		t.Errorf("String(%#v) = %q, want a/b/c", b, got)
	}
	c1 := subscriber.Key{Service: "s", Clusters: []string{"a", "b,c"}}
	c2 := subscriber.Key{Service: "s", Clusters: []string{"b,c", "a"}}
	c3 := subscriber.Key{Service: "s", Clusters: []string{"a,b", "c"}}
	if c1.String() != c2.String() {
		t.Errorf("cluster order changes the key: %q vs %q", c1, c2)
	}
	if c1.String() == c3.String() {
		t.Errorf("clusters {a, b,c} and {a,b, c} print alike: %q", c1)
	}
	// A cluster named twice is the same set (Nacos de-duplicates them).
	d1 := subscriber.Key{Service: "s", Clusters: []string{"a", "b", "a"}}
	d2 := subscriber.Key{Service: "s", Clusters: []string{"b", "a"}}
	if d1.String() != d2.String() {
		t.Errorf("clusters {a, b, a} and {b, a}: printed %q, %q; want one set", d1, d2)
	}
	// Empty names keep their place: the namespace "a" is not the group "a".
	e1 := subscriber.Key{Namespace: "a", Service: "s"}
	e2 := subscriber.Key{Group: "a", Service: "s"}
	if e1.String() == e2.String() {
		t.Errorf("String(%#v) == String(%#v) == %q", e1, e2, e1)
	}
}

// The in-memory registry keeps apart keys whose names join alike ("a/b/c"):
// a subscriber of one once got the other's instances.
func TestRegistryKeysThatJoinAlike(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := subscribertest.New()
		a := subscriber.Key{Service: "a/b/c"}
		b := subscriber.Key{Namespace: "a", Group: "b", Service: "c"}
		reg.Set(a, subscriber.Instance{IP: "10.0.0.1", Port: 1, Healthy: true, Enabled: true, Weight: 1})
		m, err := subscriber.New(reg)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		var got [][]subscriber.Instance
		sub, err := m.Subscribe(context.Background(), b, func(l []subscriber.Instance) { got = append(got, l) })
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Unsubscribe()
		synctest.Wait()
		for _, l := range got {
			if len(l) != 0 {
				t.Fatalf("the subscriber of %#v got %v, the instances of %#v", b, l, a)
			}
		}
	})
}
