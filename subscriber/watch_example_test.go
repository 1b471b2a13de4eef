package subscriber_test

import (
	"fmt"

	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/subscribertest"
)

// ExampleManager_NewWatchGroup: two readers of one key share one registry
// subscription; each waits for the change signal and reads the latest
// snapshot.
func ExampleManager_NewWatchGroup() {
	reg := subscribertest.New()
	key := subscriber.Key{Service: "orders"}
	reg.Set(key, subscriber.Instance{IP: "10.0.0.1", Port: 8080, Healthy: true, Enabled: true})
	m, _ := subscriber.New(reg)
	defer m.Close()

	g, _ := m.NewWatchGroup(0, 0) // no linger, the default refresh pace
	defer g.Close()
	a, _ := g.Watch(key)
	defer a.Close()
	b, _ := g.Watch(key)
	defer b.Close()
	for _, v := range []*subscriber.View{a, b} {
		for s := v.Snapshot(); !s.HasList; s = v.Snapshot() {
			<-v.Changed() // a select on a ctx too, in real code
		}
		s := v.Snapshot()
		fmt.Println(s.List[0].IP, s.List[0].Port, s.Unresolved, s.Stopped)
	}
	fmt.Println("registry subscriptions:", reg.Stats().Subscribes)
	// Output:
	// 10.0.0.1 8080 <nil> <nil>
	// 10.0.0.1 8080 <nil> <nil>
	// registry subscriptions: 1
}
