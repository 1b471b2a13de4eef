package statusz_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/rebound-go/rebound/statusz"
	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/subscribertest"
)

// Mount the page where operators can reach it; ?format=json (or an Accept
// header preferring application/json) serves the same data as JSON.
func ExampleNew() {
	reg := subscribertest.New() // in a service: nacos.New(client) or etcd.New(...)
	reg.Set(subscriber.Key{Service: "orders"}, subscribertest.Instance("10.0.0.7", 8080))
	m, err := subscriber.New(reg)
	if err != nil {
		panic(err)
	}
	defer m.Close()
	delivered := make(chan struct{})
	sub, err := m.Subscribe(context.Background(), subscriber.Key{Service: "orders"}, func([]subscriber.Instance) {
		close(delivered) // (called once here: the list never changes)
	})
	if err != nil {
		panic(err)
	}
	<-delivered   // the list arrived
	<-sub.Ready() // and the registry acknowledged the subscription

	page, err := statusz.New(statusz.WithSubscriptions("nacos", m))
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/debug/rebound", page)

	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/debug/rebound?format=json", nil))
	var p struct { // the JSON shape: see docs/statusz.md
		Managers []struct {
			Name          string
			Subscriptions []struct {
				Key, State string
				Instances  int
			}
		}
	}
	_ = json.Unmarshal(rec.Body.Bytes(), &p)
	s := p.Managers[0].Subscriptions[0]
	fmt.Println(p.Managers[0].Name, s.Key, s.State, s.Instances)
	// Output:
	// nacos orders subscribed 1
}
