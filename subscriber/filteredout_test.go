package subscriber_test

import (
	"testing"

	"github.com/rebound-go/rebound/subscriber"
)

func TestFilteredOut(t *testing.T) {
	ok := subscriber.Instance{IP: "10.0.0.1", Port: 80, Weight: 1, Healthy: true, Enabled: true}
	with := func(f func(*subscriber.Instance)) subscriber.Instance {
		in := ok
		f(&in)
		return in
	}
	disabled := with(func(in *subscriber.Instance) { in.Enabled = false })
	unhealthy := with(func(in *subscriber.Instance) { in.Healthy = false })
	zero := with(func(in *subscriber.Instance) { in.Weight = 0 })
	noAddr := with(func(in *subscriber.Instance) { in.Port = 0 })
	orders := subscriber.Key{Service: "orders"}
	for _, tc := range []struct {
		key  subscriber.Key
		list []subscriber.Instance
		want string
	}{
		{orders, nil, "no instances of orders"},
		{orders, []subscriber.Instance{disabled, disabled, disabled}, "3 instances of orders, all disabled"},
		{orders, []subscriber.Instance{unhealthy}, "1 instance of orders, unhealthy"},
		{subscriber.Key{}, []subscriber.Instance{zero, zero}, "2 instances, all weight 0"},
		{orders, []subscriber.Instance{disabled, disabled, unhealthy, zero, noAddr, ok},
			"6 instances of orders, none usable: 1 without an address, 2 disabled, 1 unhealthy, 1 weight 0, 1 refused by the filter"},
		// The zero value of the flags counts as disabled: its first reason.
		{orders, []subscriber.Instance{{IP: "10.0.0.1", Port: 80}}, "1 instance of orders, disabled"},
	} {
		if got := subscriber.FilteredOut(tc.key, tc.list); got != tc.want {
			t.Errorf("FilteredOut(%v, %d instances) = %q, want %q", tc.key, len(tc.list), got, tc.want)
		}
	}
}
