package etcd_test

import (
	"context"
	"errors"
	"math"
	"testing"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/subscriber"
	etcdreg "github.com/rebound-go/rebound/subscriber/etcd"
)

// TestRegisterAndUpdateRejectBadWeight: a negative, NaN or infinite
// Weight is a *rebound.ArgumentError naming inst.Weight, for Register and
// Update, as nacos.Register and nacos.Registration.Update say (a NaN
// weight was a bare json error; a negative one was stored, and
// consumers then read an instance no balancer can weigh).
func TestRegisterAndUpdateRejectBadWeight(t *testing.T) {
	c := newCluster(t, 1)
	cli := newClient(t, c)
	ctx := context.Background()
	for _, w := range []float64{-1, math.NaN(), math.Inf(1)} {
		in := inst("10.0.0.1", 80)
		in.Weight = w
		g, err := etcdreg.RegisterConcrete(ctx, cli, orders, in)
		var ae *rebound.ArgumentError
		if g != nil || !errors.As(err, &ae) || ae.Arg != "inst.Weight" {
			if g != nil {
				_ = g.Shutdown(ctx)
			}
			t.Errorf("Register with Weight %v = %v, %v; want an ArgumentError naming inst.Weight", w, g, err)
		}
	}
	g, err := etcdreg.RegisterConcrete(ctx, cli, orders, inst("10.0.0.1", 80))
	if err != nil {
		t.Fatal(err)
	}
	defer g.Shutdown(ctx)
	for _, w := range []float64{-1, math.NaN(), math.Inf(-1)} {
		up := g.Instance()
		up.Weight = w
		err := g.Update(ctx, up)
		var ae *rebound.ArgumentError
		if !errors.As(err, &ae) || ae.Arg != "inst.Weight" {
			t.Errorf("Update with Weight %v = %v; want an ArgumentError naming inst.Weight", w, err)
		}
	}
	if st := g.Status(); st.State != subscriber.RegistrationRegistered {
		t.Fatalf("state after rejected Updates = %v", st.State)
	}
}
