package etcd_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rebound-go/rebound"
	etcdreg "github.com/rebound-go/rebound/subscriber/etcd"
)

// Two Registrations of one instance on two clients: the one that yields
// Updates while the holder shuts down, concurrently. Whatever the order,
// the survivor ends up holding the key with its latest value.
func TestYielderUpdatesWhileHolderShutsDown(t *testing.T) {
	c := newCluster(t, 1)
	cliA, cliB, admin := newClient(t, c), newClient(t, c), newClient(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 3*waitTimeout)
	defer cancel()
	opts := []etcdreg.Option{etcdreg.WithTTL(2 * time.Second),
		etcdreg.WithPolicy(rebound.Policy{Initial: 50 * time.Millisecond, Max: 300 * time.Millisecond})}
	for i := range 5 {
		in := inst("10.0.0.1", uint64(100+i))
		in.Weight = 1
		a, err := etcdreg.RegisterConcrete(ctx, cliA, orders, in, opts...)
		if err != nil {
			t.Fatal(err)
		}
		in.Weight = 2
		b, err := etcdreg.RegisterConcrete(ctx, cliB, orders, in, opts...)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		const last = 20
		wg.Go(func() {
			for w := 3; w <= last; w++ {
				up := in
				up.Weight = float64(w)
				if err := a.Update(ctx, up); err != nil {
					t.Errorf("A.Update: %v", err)
				}
			}
		})
		wg.Go(func() {
			if err := b.Shutdown(ctx); err != nil {
				t.Errorf("B.Shutdown: %v", err)
			}
		})
		wg.Wait()
		want := fmt.Sprintf("lease %x weight %d", a.Lease(), last)
		got := ""
		eventually(t, "A holds the key with its latest value", func() bool {
			resp, err := admin.Get(ctx, a.InstanceKey())
			got = fmt.Sprint("none ", err)
			if err == nil && len(resp.Kvs) == 1 {
				got = fmt.Sprintf("lease %x %s", resp.Kvs[0].Lease, weightOf(resp.Kvs[0].Value))
			}
			return got == want
		})
		if got != want {
			t.Errorf("round %d: key %s, want %s", i, got, want)
		}
		_ = a.Shutdown(ctx)
	}
}

// weightOf is the weight in an encoded instance, as "weight N".
func weightOf(v []byte) string {
	in, err := etcdreg.DecodeInstance("x", v)
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("weight %v", in.Weight)
}
