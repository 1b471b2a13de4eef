package subscribertest

import (
	"context"
	"testing"

	"github.com/rebound-go/rebound/subscriber"
)

// TestRegistryKeysByValue: two keys whose names join alike (service
// "a/b/c"; and namespace "a", group "b", service "c") are two services of
// the Registry, not one, and print apart.
func TestRegistryKeysByValue(t *testing.T) {
	k1 := subscriber.Key{Service: "a/b/c"}
	k2 := subscriber.Key{Namespace: "a", Group: "b", Service: "c"}
	k3 := subscriber.Key{Service: "s[a]"}
	k4 := subscriber.Key{Service: "s", Clusters: []string{"a"}}
	if k1.String() == k2.String() || k3.String() == k4.String() {
		t.Fatalf("different keys print alike (%s, %s; %s, %s)", k1, k2, k3, k4)
	}
	r := New()
	r.Set(k1, subscriber.Instance{IP: "10.0.0.1", Port: 1})
	r.Set(k3, subscriber.Instance{IP: "10.0.0.3", Port: 1})
	for _, c := range []struct {
		k    subscriber.Key
		want int
	}{{k1, 1}, {k2, 0}, {k3, 1}, {k4, 0}} {
		got, err := r.Lookup(context.Background(), c.k)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != c.want {
			t.Errorf("Lookup(%#v) = %v, want %d instances (the list of a key whose names join alike leaked)", c.k, got, c.want)
		}
	}
	// Clusters in another order are the same key.
	k5 := subscriber.Key{Service: "s", Clusters: []string{"b", "a"}}
	r.Set(subscriber.Key{Service: "s", Clusters: []string{"a", "b"}}, subscriber.Instance{IP: "10.0.0.5", Port: 1})
	if got, _ := r.Lookup(context.Background(), k5); len(got) != 1 {
		t.Errorf("Lookup(%#v) = %v, want the list set with the clusters in another order", k5, got)
	}
}
