package nacostest_test

import (
	"testing"
	"time"

	"github.com/rebound-go/rebound/subscriber/nacos/nacostest"
)

// TestClusterNewestPublicationWinsAcrossNodes: after node 0 crashed, its
// peers keep their copy of its client's instance until the expiry. When
// the provider, failed over to node 1, registers the same address again
// with new metadata (a drain's weight 0, a new version), node 1 must list
// the new instance, not the stale copy: publication order must hold
// across nodes (each node counted its own, so a copy from a node that
// had counted further won).
func TestClusterNewestPublicationWinsAcrossNodes(t *testing.T) {
	c := newCluster(t, nacostest.WithSyncDelay(20*time.Millisecond), nacostest.WithSyncedExpiry(time.Hour))
	old := clusterClient(t, c, 0)
	p := registerParam("orders", "10.0.0.1", 8080)
	for range 20 { // node 0 counts its publications further than node 1
		mustRegister(t, old, p)
	}
	p.Metadata = map[string]string{"v": "1"}
	mustRegister(t, old, p)
	eventually(t, "node 1 to hold node 0's copy", func() bool {
		in := c.Instances(1, "", "", "orders")
		return len(in) == 1 && in[0].Metadata["v"] == "1"
	})
	c.Node(0).Stop()
	moved := clusterClient(t, c, 1)
	p.Metadata = map[string]string{"v": "2"}
	mustRegister(t, moved, p)
	in := c.Instances(1, "", "", "orders")
	if len(in) != 1 || in[0].Metadata["v"] != "2" {
		t.Fatalf("node 1 lists %+v after the new registration, want one instance with v=2", in)
	}
}

// TestClusterCrashedNodeSendsNoLateCopy: a copy scheduled on node 0
// just before it crashed must not be sent by node 0 restarted within the
// sync delay: the restarted node no longer knows the connection and
// would tell its peers to drop the client's instances, which they must
// keep until the expiry (the time a client has to fail over).
func TestClusterCrashedNodeSendsNoLateCopy(t *testing.T) {
	c := newCluster(t, nacostest.WithSyncDelay(300*time.Millisecond), nacostest.WithSyncedExpiry(time.Hour))
	prov := clusterClient(t, c, 0)
	p := registerParam("orders", "10.0.0.1", 8080)
	mustRegister(t, prov, p)
	eventually(t, "node 1 to hold node 0's copy", func() bool { return len(c.Instances(1, "", "", "orders")) == 1 })
	p.Metadata = map[string]string{"v": "2"}
	mustRegister(t, prov, p) // a copy scheduled in 300 ms
	c.Node(0).Stop()
	c.Node(0).SetRefuseConnections(true) // the client stays away: only the copy lists it
	if err := c.Node(0).Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(600 * time.Millisecond) // the scheduled copy's time has passed
	if got := c.Instances(1, "", "", "orders"); len(got) != 1 {
		t.Fatalf("node 1 lists %v after node 0's crash and restart, want its copy kept until the expiry", got)
	}
}
