//go:build !race

// These tests make nacos-sdk-go clients fail over to another node, which
// runs the SDK's reconnect path (data races in nacos-sdk-go v2.3.2: see
// reconnect_test.go).

package nacostest_test

import (
	"slices"
	"testing"
	"time"

	"github.com/nacos-group/nacos-sdk-go/v2/vo"

	"github.com/rebound-go/rebound/subscriber/nacos/nacostest"
)

// connectedNode returns the node the client's connection is on (the only
// node with a connection, in these tests: one client per cluster side).
func connectedNode(t *testing.T, c *nacostest.Cluster, among ...int) int {
	t.Helper()
	node := -1
	eventually(t, "one node with the client's connection", func() bool {
		node = -1
		for _, i := range among {
			if c.Node(i).ConnectionCount() > 0 {
				if node >= 0 {
					return false
				}
				node = i
			}
		}
		return node >= 0
	})
	return node
}

// A node crash: the provider's client fails over to another node and its
// SDK registers again there; the consumer, on the third node, keeps the
// provider throughout (its node holds the copy), and once the crashed
// node's copies expire every running node lists the provider once.
func TestClusterNodeCrashFailover(t *testing.T) {
	c := newCluster(t, nacostest.WithSyncDelay(100*time.Millisecond), nacostest.WithSyncedExpiry(2*time.Second))
	prov := clusterClient(t, c, 0, 1)
	from := connectedNode(t, c, 0, 1)
	other := 1 - from
	cons := clusterClient(t, c, 2)
	var h history
	if err := cons.Subscribe(&vo.SubscribeParam{ServiceName: "orders", SubscribeCallback: h.callback}); err != nil {
		t.Fatal(err)
	}
	mustRegister(t, prov, registerParam("orders", "10.0.0.1", 8080))
	eventually(t, "every node to list the provider", func() bool {
		for i := range 3 {
			if len(viewAddrs(c, i, "orders")) != 1 {
				return false
			}
		}
		return true
	})

	c.Node(from).Stop()
	eventually(t, "the provider's client on the other node", func() bool { return c.Node(other).ConnectionCount() > 0 })
	eventually(t, "the surviving nodes to list the provider once its copy expired", func() bool {
		return slices.Equal(viewAddrs(c, other, "orders"), []string{"10.0.0.1:8080"}) &&
			slices.Equal(viewAddrs(c, 2, "orders"), []string{"10.0.0.1:8080"})
	})
	time.Sleep(2500 * time.Millisecond) // past the expiry of node from's copies
	for _, i := range []int{other, 2} {
		if got := viewAddrs(c, i, "orders"); !slices.Equal(got, []string{"10.0.0.1:8080"}) {
			t.Errorf("node %d lists %v after the failover and the expiry", i, got)
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, l := range h.lists {
		// The subscribe reply before the registration is the only empty
		// list the consumer may see.
		if len(l) != 1 && !(i == 0 && len(l) == 0) {
			t.Errorf("the consumer was handed %v during the crash, want the provider throughout (lists %q)", l, h.lists)
			break
		}
	}
}

// A change made within the sync delay before the crash never left the
// node: the node the client fails over to does not have it until the
// client's SDK registers again there.
func TestClusterCrashBeforeSync(t *testing.T) {
	c := newCluster(t, nacostest.WithSyncDelay(time.Hour))
	prov := clusterClient(t, c, 0, 1)
	from := connectedNode(t, c, 0, 1)
	other := 1 - from
	mustRegister(t, prov, registerParam("orders", "10.0.0.1", 8080))
	if got := viewAddrs(c, other, "orders"); len(got) != 0 {
		t.Fatalf("node %d lists %v before any sync", other, got)
	}
	before := c.Node(other).Stats().Requests[nacostest.RequestInstance]
	c.Node(from).Stop()
	eventually(t, "the SDK's redo to register on the other node", func() bool {
		return slices.Equal(viewAddrs(c, other, "orders"), []string{"10.0.0.1:8080"})
	})
	if after := c.Node(other).Stats().Requests[nacostest.RequestInstance]; after <= before {
		t.Fatalf("node %d listed the provider without a register request (%d before, %d after)", other, before, after)
	}
}
