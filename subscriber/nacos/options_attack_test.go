package nacos_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/nacos"
)

// Register refuses New's options with an *ArgumentError naming them.
func TestRegisterRefusesNewOptions(t *testing.T) {
	for _, tc := range []struct {
		opt  nacos.Option
		name string
	}{
		{nacos.WithPollInterval(time.Second, time.Second), "nacos.WithPollInterval"},
		{nacos.WithEvidenceWindow(time.Second, 2*time.Second), "nacos.WithEvidenceWindow"},
	} {
		g, err := nacos.Register(context.Background(), newFakeSDK(), subscriber.Key{Service: "orders"}, inst("10.0.0.1", 8080), tc.opt)
		if g != nil {
			_ = g.Close()
		}
		ae, ok := errors.AsType[*rebound.ArgumentError](err)
		if !ok || ae.Func != "nacos.Register" || !strings.Contains(err.Error(), tc.name) {
			t.Errorf("Register with %s = %v", tc.name, err)
		}
	}
	// A nil rebound option among WithPolicy's is ignored, a bad
	// one is an argument error.
	srv := newServer(t)
	c := newClient(t, srv)
	g := mustRegisterNacos(t, c, subscriber.Key{Service: "orders"}, inst("10.0.0.1", 8080), nacos.WithPolicy(rebound.Policy{}, nil))
	_ = g.Close()
	_, err := nacos.Register(context.Background(), c, subscriber.Key{Service: "orders"}, inst("10.0.0.2", 8080),
		nacos.WithPolicy(rebound.Policy{}, rebound.WithBudget(nil)))
	t.Logf("bad rebound option: %v", err)
	if !errors.Is(err, rebound.ErrInvalidArgument) {
		t.Errorf("bad rebound option: %v", err)
	}
}

// WithPolicy absorbed WithRegisterRetryOptions, which appended
// (two calls added up). Now a second WithPolicy silently drops the
// rebound options of the first: a shared budget given by one layer is gone
// when another sets the policy, with no error.
func TestRegisterPolicyOptionsLostSilently(t *testing.T) {
	srv := newServer(t)
	c := newClient(t, srv)
	// Marker: a rebound option NewRetrier refuses, so we can see whether
	// the first call's options reach the Retrier at all.
	first := nacos.WithPolicy(rebound.Policy{}, rebound.WithBudget(nil))
	if _, err := nacos.Register(context.Background(), c, subscriber.Key{Service: "orders"}, inst("10.0.0.3", 8080), first); err == nil {
		t.Fatal("setup: a nil budget is not refused")
	}
	g, err := nacos.Register(context.Background(), c, subscriber.Key{Service: "orders"}, inst("10.0.0.3", 8080),
		first, nacos.WithPolicy(rebound.Policy{Initial: time.Second}))
	if err == nil {
		_ = g.Close()
		t.Errorf("two WithPolicy: the rebound options of the first never reached the Retrier (dropped without an error);" +
			" the WithRegisterRetryOptions it replaced appended")
	}
}
