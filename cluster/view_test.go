package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"

	"go.uber.org/goleak"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/cluster"
	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/subscribertest"
)

type viewInvoker string

func (a viewInvoker) Invoke(context.Context, *cluster.Invocation) (any, error) { return nil, nil }
func (a viewInvoker) Target() string                                           { return string(a) }

func dialAddr(in subscriber.Instance) (cluster.Invoker, error) {
	return viewInvoker(fmt.Sprintf("%s:%d", in.IP, in.Port)), nil
}

func targets(t *testing.T, d *cluster.RegistryDirectory) string {
	t.Helper()
	l, err := d.List(context.Background(), nil)
	if err != nil {
		return err.Error()
	}
	out := ""
	for _, iv := range l {
		out += iv.Target() + " "
	}
	return out
}

// TestDirectoryWithView: two directories over one key read one shared
// Manager subscription; each follows the list; Close of the last one ends
// the subscription and leaves no goroutine.
func TestDirectoryWithView(t *testing.T) {
	defer goleak.VerifyNone(t)
	synctest.Test(t, func(t *testing.T) {
		key := subscriber.Key{Service: "orders"}
		in := func(port uint64) subscriber.Instance {
			return subscriber.Instance{ID: fmt.Sprint(port), IP: "10.0.0.1", Port: port, Weight: 1, Healthy: true, Enabled: true}
		}
		reg := subscribertest.New()
		reg.Set(key, in(1))
		m, err := subscriber.New(reg)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		views, err := m.NewWatchGroup(0, 0)
		if err != nil {
			t.Fatal(err)
		}
		var dirs []*cluster.RegistryDirectory
		for range 2 {
			v, err := views.Watch(key)
			if err != nil {
				t.Fatal(err)
			}
			d, err := cluster.NewRegistryDirectory(dialAddr, cluster.WithView(v))
			if err != nil {
				t.Fatal(err)
			}
			dirs = append(dirs, d)
		}
		for i, d := range dirs {
			if err := d.WaitReady(context.Background()); err != nil {
				t.Fatal(err)
			}
			if got := targets(t, d); got != "10.0.0.1:1 " {
				t.Fatalf("directory %d lists %q", i, got)
			}
		}
		reg.Set(key, in(1), in(2))
		synctest.Wait()
		for i, d := range dirs {
			if got := targets(t, d); got != "10.0.0.1:1 10.0.0.1:2 " {
				t.Fatalf("directory %d lists %q after the change", i, got)
			}
		}
		if s := reg.Stats(); s.Subscribes != 1 || s.Active != 1 {
			t.Fatalf("registry %+v, want one subscription for both directories", s)
		}
		_ = dirs[0].Close()
		synctest.Wait()
		if s := reg.Stats(); s.Active != 1 {
			t.Fatalf("registry %+v after one directory closed", s)
		}
		_ = dirs[1].Close()
		_ = dirs[1].Close()
		synctest.Wait()
		if s := reg.Stats(); s.Active != 0 || s.Unsubscribes != 1 {
			t.Fatalf("registry %+v after both closed, want unsubscribed", s)
		}
	})
}

func TestWithViewNil(t *testing.T) {
	_, err := cluster.NewRegistryDirectory(dialAddr, cluster.WithView(nil))
	var ae *rebound.ArgumentError
	if !errors.As(err, &ae) || ae.Func != "cluster.WithView" || ae.Arg != "v" {
		t.Fatalf("WithView(nil): %v", err)
	}
}
