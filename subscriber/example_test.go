package subscriber_test

import (
	"context"
	"fmt"
	"time"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/subscribertest"
)

func Example() {
	reg := subscribertest.New() // an in-memory registry; use subscriber/nacos for Nacos
	key := subscriber.Key{Service: "orders"}
	reg.Set(key, subscriber.Instance{IP: "10.0.0.1", Port: 8080, Healthy: true, Enabled: true})

	m, err := subscriber.New(reg)
	if err != nil {
		panic(err)
	}
	defer m.Close()

	lists := make(chan []subscriber.Instance, 10)
	sub, err := m.Subscribe(context.Background(), key, func(list []subscriber.Instance) {
		lists <- list
	})
	if err != nil {
		panic(err)
	}
	<-sub.Ready()
	fmt.Println("first:", len(<-lists), "instance(s)", sub.Status().State)

	reg.Set(key,
		subscriber.Instance{IP: "10.0.0.2", Port: 8080, Healthy: true, Enabled: true},
		subscriber.Instance{IP: "10.0.0.1", Port: 8080, Healthy: true, Enabled: true})
	for _, in := range <-lists {
		fmt.Println(in.IP) // lists are sorted
	}

	if err := sub.Unsubscribe(); err != nil {
		panic(err)
	}
	fmt.Println(sub.Err())
	// Output:
	// first: 1 instance(s) subscribed
	// 10.0.0.1
	// 10.0.0.2
	// subscriber: unsubscribed
}

func ExampleManager_Status() {
	reg := subscribertest.New()
	m, _ := subscriber.New(reg)
	defer m.Close()
	sub, _ := m.Subscribe(context.Background(), subscriber.Key{Group: "pay", Service: "billing"}, func([]subscriber.Instance) {})
	<-sub.Ready()
	for _, st := range m.Status() {
		fmt.Println(st.Key, st.State, st.Attempts, st.LastErr)
	}
	// Output:
	// pay/billing subscribed 1 <nil>
}

// A retry budget and an adaptive throttle, shared with the process's other
// loops (failback, Retry), bound what a Manager sends to a registry that
// keeps failing; a subscription never gives up because of them: a retry
// they refuse is deferred to the next backoff step (Status.Deferred).
func ExampleWithPolicy() {
	reg := subscribertest.New()
	fails := 2 // the registry rejects the first two requests
	reg.SetFailure(func(subscriber.Key) error {
		if fails > 0 {
			fails--
			return subscribertest.ErrUnavailable
		}
		return nil
	})
	budget, err := rebound.NewRetryBudget(0.2, 10, 10*time.Second) // 20% of first attempts + 10/s over 10 s
	if err != nil {
		panic(err)
	}
	throttle, err := rebound.NewAdaptiveThrottle(2, 2*time.Minute, nil) // the SRE book's K = 2, 2 min window
	if err != nil {
		panic(err)
	}
	m, err := subscriber.New(reg, subscriber.WithPolicy(rebound.Policy{Initial: 10 * time.Millisecond, Max: 50 * time.Millisecond},
		rebound.WithBudget(budget), rebound.WithThrottle(throttle)))
	if err != nil {
		panic(err)
	}
	defer m.Close()
	sub, err := m.Subscribe(context.Background(), subscriber.Key{Service: "orders"}, func([]subscriber.Instance) {})
	if err != nil {
		panic(err)
	}
	<-sub.Ready()
	st := sub.Status()
	fmt.Println(st.State, st.LastErr, st.TotalAttempts, "requests sent")
	// Output: subscribed <nil> 3 requests sent
}
