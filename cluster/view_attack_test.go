package cluster_test

import (
	"errors"
	"testing"
	"testing/synctest"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/cluster"
	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/subscribertest"
)

// TestWithViewFailedConstructorLeaksView: WithView says the directory
// owns v (Close closes it), so a caller does not close v. When
// NewRegistryDirectory fails (a nil dial, an option of the breaker
// directory given by mistake, WithView given twice) there is no directory
// to Close: the constructor closes the View(s) itself. Before, v stayed
// open and the key's Manager subscription with it (renewed against the
// registry) until the Manager closed.
func TestWithViewFailedConstructorLeaksView(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		key := subscriber.Key{Service: "orders"}
		reg := subscribertest.New()
		reg.Set(key, subscriber.Instance{ID: "1", IP: "10.0.0.1", Port: 1, Weight: 1, Healthy: true, Enabled: true})
		m, err := subscriber.New(reg)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		views, err := m.NewWatchGroup(0, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			name  string
			dial  func(subscriber.Instance) (cluster.Invoker, error)
			opts  []cluster.Option
			twice bool
		}{
			{"nil dial", nil, nil, false},
			{"breaker option", dialAddr, []cluster.Option{cluster.WithMaxEjected(0.5)}, false},
			{"WithView twice", dialAddr, nil, true},
		} {
			v, err := views.Watch(key)
			if err != nil {
				t.Fatal(err)
			}
			if tc.twice {
				v2, err := views.Watch(key)
				if err != nil {
					t.Fatal(err)
				}
				tc.opts = append(tc.opts, cluster.WithView(v2))
			}
			d, err := cluster.NewRegistryDirectory(tc.dial, append([]cluster.Option{cluster.WithView(v)}, tc.opts...)...)
			if d != nil {
				_ = d.Close()
			}
			if !errors.Is(err, rebound.ErrInvalidArgument) {
				t.Fatalf("%s: NewRegistryDirectory: %v, want an ArgumentError", tc.name, err)
			}
			synctest.Wait()
			if n := reg.Subscribed(key); n != 0 {
				t.Errorf("%s: NewRegistryDirectory failed (%v) but the View it was given (and owns) is still open: "+
					"%d registry subscription(s) of %s remain until the Manager closes", tc.name, err, n, key.Service)
			}
			_ = v.Close() // idempotent; a caller following the doc does not need it
			synctest.Wait()
		}
	})
}
