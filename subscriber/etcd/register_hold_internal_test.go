package etcd

import (
	"context"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/etcd/etcdtest"
)

// TestHubHoldsLeasesWhileTheStreamIsDown: with the member stopped, the
// hub's new keep-alive stream fails, and the first keep-alive falling due
// has the hub hold every lease (their keep-alives wait for a stream, not
// each for its due time). When the member is back before the TTL's end, a
// stream answers, the hold ends, and every Registration is answered again
// on its own lease: none waited for its TTL's end to probe the lease, none
// registered again.
func TestHubHoldsLeasesWhileTheStreamIsDown(t *testing.T) {
	c, err := etcdtest.NewCluster(1, etcdtest.WithDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cli, err := clientv3.New(ClientConfig(nil, c.Endpoints()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	core, logs := observer.New(zap.WarnLevel)
	var regs []*registration
	for i := range 3 {
		g, err := Register(ctx, cli, subscriber.Key{Service: "orders"},
			subscriber.Instance{IP: fmt.Sprintf("10.0.3.%d", i+1), Port: 80, Weight: 1, Enabled: true, Healthy: true},
			WithTTL(15*time.Second), WithLogger(zap.New(core)))
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		regs = append(regs, g.(*registration))
	}
	hub, leases := regs[0].hub, make([]clientv3.LeaseID, len(regs))
	for i, g := range regs {
		leases[i] = g.currentLease()
	}
	until := func(what string, cond func() bool) {
		t.Helper()
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for !cond() {
			select {
			case <-ctx.Done():
				t.Fatalf("%s: not within a minute", what)
			case <-tick.C:
			}
		}
	}
	c.Stop()
	until("the hub holds the leases", hub.holding)
	back := time.Now()
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	until("the hold ends", func() bool { return !hub.holding() })
	for _, g := range regs {
		until("an answer after the member is back", func() bool {
			last := make(chan time.Time, 1)
			if !g.loop.Do(func() bool { last <- g.h.kaLast; return true }) {
				t.Fatal("the Registration's loop ended")
			}
			return (<-last).After(back)
		})
	}
	if n := logs.FilterMessageSnippet("no keep-alive answer for a TTL").Len(); n > 0 {
		t.Fatalf("%d Registrations waited for their TTL's end to probe the lease; want none (the hold ends with the stream's answer)", n)
	}
	for i, g := range regs {
		if st := g.Status(); g.currentLease() != leases[i] || st.Registrations != 1 {
			t.Fatalf("Registration %d: lease %x (was %x), %d registrations; want the same lease, one", i, g.currentLease(), leases[i], st.Registrations)
		}
	}
}
