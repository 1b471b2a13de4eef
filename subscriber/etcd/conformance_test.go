package etcd_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/subscriber"
	etcdreg "github.com/rebound-go/rebound/subscriber/etcd"
	"github.com/rebound-go/rebound/subscriber/subscribertest"
)

// TestConformance runs the conformance suite of package subscribertest
// against the adapter and a single-member embedded etcd. Providers write
// their keys without a lease, each through a client of its own that is
// closed at once: a provider client left running would reconnect in the
// background while the cluster is down, and the suite's leak checks
// cannot tell its goroutines from the adapter's. (Register, which keeps a
// client busy with its lease, is tested in register_test.go.)
func TestConformance(t *testing.T) {
	c := newCluster(t, 1)
	provider := func(t *testing.T, what string, op func(ctx context.Context, cli *clientv3.Client) error) {
		t.Helper()
		cli, err := clientv3.New(etcdreg.ClientConfig(nil, c.Endpoints()...))
		if err != nil {
			t.Fatal(err)
		}
		defer cli.Close()
		write(t, what, func(ctx context.Context) error { return op(ctx, cli) })
	}
	instanceKey := func(t *testing.T, k subscriber.Key, inst subscriber.Instance) string {
		t.Helper()
		key, err := etcdreg.InstanceKey(etcdreg.DefaultPrefix, k, etcdreg.InstanceID(inst))
		if err != nil {
			t.Fatal(err)
		}
		return key
	}
	subscribertest.Run(t, subscribertest.Harness{
		NewRegistry: func(t *testing.T) (subscriber.Registry, func()) {
			cli, err := clientv3.New(etcdreg.ClientConfig(nil, c.Endpoints()...))
			if err != nil {
				t.Fatal(err)
			}
			r, err := etcdreg.New(cli)
			if err != nil {
				t.Fatal(err)
			}
			return r, func() {
				_ = r.Close()
				_ = cli.Close()
			}
		},
		Register: func(t *testing.T, k subscriber.Key, inst subscriber.Instance) {
			key := instanceKey(t, k, inst)
			v, err := etcdreg.EncodeInstance(inst)
			if err != nil {
				t.Fatal(err)
			}
			provider(t, "put "+key, func(ctx context.Context, cli *clientv3.Client) error {
				_, err := cli.Put(ctx, key, string(v))
				return err
			})
		},
		Deregister: func(t *testing.T, k subscriber.Key, inst subscriber.Instance) {
			key := instanceKey(t, k, inst)
			provider(t, "delete "+key, func(ctx context.Context, cli *clientv3.Client) error {
				resp, err := cli.Delete(ctx, key)
				if err == nil && resp.Deleted != 1 {
					return rebound.Permanent(fmt.Errorf("%s was not registered", key))
				}
				return err
			})
		},
		Stop: func(t *testing.T) { c.Stop() },
		Start: func(t *testing.T) {
			if err := c.Start(); err != nil {
				t.Fatal(err)
			}
			waitReady(t, c)
		},
	})
}

// TestRegistrationConformance runs the Registration conformance suite of
// package subscribertest against etcd.Register and a single-member
// embedded etcd (which keeps its data across the restart: the leases
// and keys survive it).
func TestRegistrationConformance(t *testing.T) {
	c := newCluster(t, 1)
	admin := newClient(t, c)
	subscribertest.RunRegistration(t, subscribertest.RegistrationHarness{
		NewClient: func(t *testing.T) (func(context.Context, subscriber.Key, subscriber.Instance) (subscriber.Registration, error), func()) {
			cli, err := clientv3.New(etcdreg.ClientConfig(nil, c.Endpoints()...))
			if err != nil {
				t.Fatal(err)
			}
			return func(ctx context.Context, k subscriber.Key, inst subscriber.Instance) (subscriber.Registration, error) {
					g, err := etcdreg.Register(ctx, cli, k, inst, fastRegister...)
					if err != nil {
						return nil, err // not a typed nil in the interface
					}
					return g, nil
				}, func() {
					_ = cli.Close()
				}
		},
		NewRegistry: func(t *testing.T) (subscriber.Registry, func()) {
			cli, err := clientv3.New(etcdreg.ClientConfig(nil, c.Endpoints()...))
			if err != nil {
				t.Fatal(err)
			}
			r, err := etcdreg.New(cli)
			if err != nil {
				t.Fatal(err)
			}
			return r, func() {
				_ = r.Close()
				_ = cli.Close()
			}
		},
		Listed: func(t *testing.T, k subscriber.Key, inst subscriber.Instance) bool {
			key, err := etcdreg.InstanceKey(etcdreg.DefaultPrefix, k, etcdreg.InstanceID(inst))
			if err != nil {
				return false
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			resp, err := admin.Get(ctx, key)
			if err != nil {
				t.Fatalf("get %s: %v", key, err)
			}
			return len(resp.Kvs) == 1
		},
		Lose: func(t *testing.T, k subscriber.Key, inst subscriber.Instance) {
			key, err := etcdreg.InstanceKey(etcdreg.DefaultPrefix, k, etcdreg.InstanceID(inst))
			if err != nil {
				t.Fatal(err)
			}
			write(t, "delete "+key, func(ctx context.Context) error {
				_, err := admin.Delete(ctx, key)
				return err
			})
		},
		Stop: func(t *testing.T) { c.Stop() },
		Start: func(t *testing.T) {
			if err := c.Start(); err != nil {
				t.Fatal(err)
			}
			waitReady(t, c)
		},
	})
}
