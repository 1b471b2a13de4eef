package reboundkratos_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rebound-go/rebound/reboundkratos"
	"github.com/rebound-go/rebound/subscriber"
)

// TestDeregisterDuringRegisterLeavesNoGhost: kratos.App.Stop may run while
// App.Run's Register is still in flight (the registry was slow or down).
// Deregister must not ignore that instance: once Deregister returned, the
// instance must not be (or become) registered.
func TestDeregisterDuringRegisterLeavesNoGhost(t *testing.T) {
	f := &fakeRegs{}
	entered := make(chan struct{}, 4)
	release := make(chan struct{})
	slow := func(ctx context.Context, key subscriber.Key, inst subscriber.Instance) (subscriber.Registration, error) {
		entered <- struct{}{}
		<-release // a register request the registry answers late
		return f.register(ctx, key, inst)
	}
	r, err := reboundkratos.NewRegistrar(reboundkratos.FormatEtcd, slow, reboundkratos.WithDrainDelay(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	si := helloworld()
	regDone := make(chan error, 1)
	go func() { regDone <- r.Register(context.Background(), si) }()
	<-entered
	deregDone := make(chan error, 1)
	go func() { deregDone <- r.Deregister(context.Background(), si) }()
	// Deregister must not return before the in-flight Register ended;
	// let the registry answer after a moment either way.
	var rerr, derr error
	got := 0
	select {
	case derr = <-deregDone:
		got++
		t.Logf("Deregister returned %v while Register was in flight", derr)
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for got < 2 {
		select {
		case rerr = <-regDone:
			got++
		case derr = <-deregDone:
			got++
		case <-ctx.Done():
			t.Fatal("Register or Deregister did not return")
		}
	}
	t.Logf("Register: %v; Deregister: %v", rerr, derr)
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.live) != 0 {
		t.Fatalf("after Deregister returned %v, still registered: %v (events %v)", derr, f.live, f.events)
	}
}

// TestCloseEndsAnInFlightRegister: Close makes Register return ErrClosed,
// also a Register that is retrying a failing first registration (it kept
// retrying until its ctx ended).
func TestCloseEndsAnInFlightRegister(t *testing.T) {
	f := &fakeRegs{fail: errors.New("registry down")}
	tried := make(chan struct{}, 1)
	failing := func(ctx context.Context, key subscriber.Key, inst subscriber.Instance) (subscriber.Registration, error) {
		select {
		case tried <- struct{}{}:
		default:
		}
		return f.register(ctx, key, inst)
	}
	r, err := reboundkratos.NewRegistrar(reboundkratos.FormatEtcd, failing)
	if err != nil {
		t.Fatal(err)
	}
	regDone := make(chan error, 1)
	go func() { regDone <- r.Register(context.Background(), helloworld()) }()
	<-tried
	_ = r.Close()
	select {
	case err := <-regDone:
		if !errors.Is(err, reboundkratos.ErrClosed) {
			t.Fatalf("Register after Close = %v, want ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Register still retrying 10 s after Close")
	}
}
