package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sony/gobreaker/v2"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/cluster"
)

// down is a provider whose deploy is broken: it answers every call with a
// transient error.
type down struct{ addr string }

func (d down) Target() string { return d.addr }
func (down) Invoke(context.Context, *cluster.Invocation) (any, error) {
	return nil, rebound.Transient(errors.New("UNAVAILABLE"))
}

func ExampleNewBreakerDirectory() {
	inner := cluster.NewStaticDirectory(&addrInvoker{addr: "10.0.0.1:20880"}, down{addr: "10.0.0.2:20880"}, &addrInvoker{addr: "10.0.0.3:20880"})
	dir, err := cluster.NewBreakerDirectory(inner,
		cluster.WithBreakerSettings(func(target string) gobreaker.Settings {
			return gobreaker.Settings{
				Timeout:     10 * time.Second, // open for 10 s, then one probe
				ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= 3 },
			}
		},
			rebound.WithObserver(rebound.ObserverFunc(func(ev rebound.Event) {
				e, ok := ev.Detail.(cluster.BreakerEvent)
				if !ok {
					return
				}
				fmt.Printf("%s: %s -> %s\n", e.Target, e.From, e.To)
			}))))
	if err != nil {
		panic(err)
	}
	ctx, inv := context.Background(), &cluster.Invocation{Method: "Notify"}
	for range 3 {
		ivs, _ := dir.List(ctx, inv)
		_, err := ivs[1].Invoke(ctx, inv) // the broken one
		fmt.Println(err)
	}
	ivs, _ := dir.List(ctx, inv)
	for _, iv := range ivs {
		fmt.Println("listed", iv.Target())
	}
	for _, s := range dir.Open() {
		fmt.Println("open:", s.Target, s.Until.Sub(s.Since))
	}
	// Output:
	// UNAVAILABLE
	// UNAVAILABLE
	// 10.0.0.2:20880: closed -> open
	// UNAVAILABLE
	// listed 10.0.0.1:20880
	// listed 10.0.0.3:20880
	// open: 10.0.0.2:20880 10s
}
