package cluster_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/rebound-go/rebound/cluster"
	"github.com/rebound-go/rebound/subscriber"
)

// addrInvoker stands for a real client of one provider.
type addrInvoker struct{ addr string }

func (a *addrInvoker) Target() string { return a.addr }
func (a *addrInvoker) Invoke(_ context.Context, inv *cluster.Invocation) (any, error) {
	return a.addr + " handled " + inv.Method, nil
}
func (a *addrInvoker) Close() error {
	fmt.Println("closed", a.addr)
	return nil
}

func ExampleRegistryDirectory() {
	dir, err := cluster.NewRegistryDirectory(func(in subscriber.Instance) (cluster.Invoker, error) {
		return &addrInvoker{addr: fmt.Sprintf("%s:%d", in.IP, in.Port)}, nil
	})
	if err != nil {
		panic(err)
	}
	defer dir.Close()

	// In a program, pass dir.Update to subscriber.Manager.Subscribe; here
	// the pushes are made by hand.
	var listener func([]subscriber.Instance) = dir.Update
	a := subscriber.Instance{IP: "10.0.0.7", Port: 20880, Healthy: true, Enabled: true}
	b := subscriber.Instance{IP: "10.0.0.8", Port: 20880, Healthy: true, Enabled: true}
	listener([]subscriber.Instance{a, b})
	listener([]subscriber.Instance{b}) // a disappears: its invoker is closed
	listener(nil)                      // an empty push keeps the last known good list

	invokers, _ := dir.List(context.Background(), nil)
	for _, iv := range invokers {
		fmt.Println("listed", iv.Target())
	}
	// Output:
	// closed 10.0.0.7:20880
	// listed 10.0.0.8:20880
	// closed 10.0.0.8:20880
}

func ExampleNewStaticDirectory() {
	dir := cluster.NewStaticDirectory(&addrInvoker{addr: "10.0.0.7:20880"}, &addrInvoker{addr: "10.0.0.8:20880"})
	lb := cluster.RoundRobin()
	inv := &cluster.Invocation{Method: "Notify"}
	for range 3 {
		invokers, _ := dir.List(context.Background(), inv)
		iv, _ := lb.Select(invokers, inv, nil)
		res, _ := iv.Invoke(context.Background(), inv)
		fmt.Println(res)
	}
	_, err := cluster.NewStaticDirectory().List(context.Background(), inv)
	fmt.Println(errors.Is(err, cluster.ErrNoInvokers), err)
	// Output:
	// 10.0.0.7:20880 handled Notify
	// 10.0.0.8:20880 handled Notify
	// 10.0.0.7:20880 handled Notify
	// true cluster: no invokers available
}
