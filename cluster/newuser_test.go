package cluster

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/subscriber"
)

func TestWaitReadyNilContext(t *testing.T) {
	d, err := NewRegistryDirectory(func(subscriber.Instance) (Invoker, error) { return nil, errors.New("unused") })
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	//lint:ignore SA1012 the test checks that a nil ctx is rejected with an error
	err = d.WaitReady(nil)
	if !errors.Is(err, rebound.ErrInvalidArgument) || !strings.Contains(err.Error(), "cluster.RegistryDirectory.WaitReady: ctx") {
		t.Fatalf("WaitReady(nil) = %v, want an *ArgumentError naming ctx", err)
	}
}

// A push whose instances the filter all leaves out used to make List
// return a bare ErrNoInvokers: the error now says why.
func TestRegistryDirectoryFilteredOutSaysWhy(t *testing.T) {
	d, _ := newDir(t)
	off := func(ip string, set func(*subscriber.Instance)) subscriber.Instance {
		in := inst(ip, 80)
		set(&in)
		return in
	}
	disabled := func(in *subscriber.Instance) { in.Enabled = false }
	unhealthy := func(in *subscriber.Instance) { in.Healthy = false }
	d.Update([]subscriber.Instance{off("10.0.0.1", disabled), off("10.0.0.2", disabled), off("10.0.0.3", disabled)})
	_, err := d.List(context.Background(), nil)
	if !errors.Is(err, ErrNoInvokers) || !strings.Contains(err.Error(), "3 instances, all disabled") {
		t.Fatalf("List = %v; want ErrNoInvokers saying \"3 instances, all disabled\"", err)
	}
	d.Update([]subscriber.Instance{off("10.0.0.1", disabled), off("10.0.0.2", disabled), off("10.0.0.3", unhealthy)})
	if _, err := d.List(context.Background(), nil); !errors.Is(err, ErrNoInvokers) || !strings.Contains(err.Error(), "3 instances, none usable: 2 disabled, 1 unhealthy") {
		t.Fatalf("List = %v; want ErrNoInvokers naming both reasons", err)
	}
	d.Update(nil)
	if _, err := d.List(context.Background(), nil); err != ErrNoInvokers {
		t.Fatalf("List after an empty push = %v; want ErrNoInvokers", err)
	}
}
