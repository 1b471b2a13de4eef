package subscriber_test

import (
	"context"
	"testing"
	"testing/synctest"

	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/subscribertest"
)

// Keys that print alike are different subscriptions; clusters in another
// order are the same one.
func TestKeyID(t *testing.T) {
	a := subscriber.Key{Service: "a/b/c"}
	b := subscriber.Key{Namespace: "a", Group: "b", Service: "c"}
	if a.String() != b.String() {
		t.Fatalf("the keys no longer print alike (%q, %q): pick another pair", a, b)
	}
	if a.ID() == b.ID() {
		t.Errorf("ID(%#v) == ID(%#v)", a, b)
	}
	c1 := subscriber.Key{Service: "s", Clusters: []string{"a", "b,c"}}
	c2 := subscriber.Key{Service: "s", Clusters: []string{"b,c", "a"}}
	c3 := subscriber.Key{Service: "s", Clusters: []string{"a,b", "c"}}
	if c1.ID() != c2.ID() {
		t.Errorf("cluster order changes the ID: %#v vs %#v", c1.ID(), c2.ID())
	}
	if c1.ID() == c3.ID() {
		t.Errorf("clusters {a, b,c} and {a,b, c} have one ID %#v", c1.ID())
	}
	// A cluster named twice is the same set (Nacos de-duplicates them).
	d1 := subscriber.Key{Service: "s", Clusters: []string{"a", "b", "a"}}
	d2 := subscriber.Key{Service: "s", Clusters: []string{"b", "a"}}
	if d1.ID() != d2.ID() || d1.String() != d2.String() {
		t.Errorf("clusters {a, b, a} and {b, a}: IDs %#v, %#v, printed %q, %q; want one set", d1.ID(), d2.ID(), d1, d2)
	}
}

// The in-memory registry keeps keys that print alike apart (it kept them
// by Key.String, so a subscriber of one got the other's instances).
func TestRegistryKeysThatPrintAlike(t *testing.T) {
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
