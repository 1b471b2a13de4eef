package nacostest_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nacos-group/nacos-sdk-go/v2/clients"
	"github.com/nacos-group/nacos-sdk-go/v2/clients/naming_client"
	"github.com/nacos-group/nacos-sdk-go/v2/common/constant"
	"github.com/nacos-group/nacos-sdk-go/v2/vo"

	"github.com/rebound-go/rebound/subscriber/nacos/nacostest"
)

func newCluster(t *testing.T, opts ...nacostest.ClusterOption) *nacostest.Cluster {
	t.Helper()
	c, err := nacostest.NewCluster(3, opts...)
	if err != nil {
		t.Fatalf("NewCluster: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// clusterClient connects a real SDK client to the given nodes of c.
func clusterClient(t *testing.T, c *nacostest.Cluster, nodes ...int) naming_client.INamingClient {
	t.Helper()
	var scs []constant.ServerConfig
	for _, i := range nodes {
		scs = append(scs, c.Node(i).ServerConfig())
	}
	cl, err := clients.NewNamingClient(vo.NacosClientParam{ClientConfig: nacostest.ClientConfig(t), ServerConfigs: scs})
	if err != nil {
		t.Fatalf("NewNamingClient: %v", err)
	}
	t.Cleanup(cl.CloseClient)
	for _, i := range nodes {
		waitQuiet(t, c.Node(i), 50*time.Millisecond)
	}
	return cl
}

func viewAddrs(c *nacostest.Cluster, node int, service string) []string {
	return addrs(c.Instances(node, "", "", service))
}

// A provider registered on node 0 reaches a subscriber on node 2 through
// the copy, after the sync delay, and node 1 lists it too; when the
// provider deregisters, every node drops it.
func TestClusterSharesInstances(t *testing.T) {
	c := newCluster(t, nacostest.WithSyncDelay(100*time.Millisecond))
	prov := clusterClient(t, c, 0)
	cons := clusterClient(t, c, 2)
	var rec recorder
	if err := cons.Subscribe(&vo.SubscribeParam{ServiceName: "orders", SubscribeCallback: rec.callback}); err != nil {
		t.Fatal(err)
	}
	mustRegister(t, prov, registerParam("orders", "10.0.0.1", 8080))
	rec.waitAddrs(t, "10.0.0.1:8080")
	for i := range 3 {
		if got := viewAddrs(c, i, "orders"); !slices.Equal(got, []string{"10.0.0.1:8080"}) {
			t.Errorf("node %d lists %v", i, got)
		}
	}
	if ok, err := prov.DeregisterInstance(vo.DeregisterInstanceParam{ServiceName: "orders", Ip: "10.0.0.1", Port: 8080, Ephemeral: true}); err != nil || !ok {
		t.Fatalf("DeregisterInstance = %v, %v", ok, err)
	}
	rec.waitAddrs(t)
	eventually(t, "every node to drop the instance", func() bool {
		for i := range 3 {
			if len(viewAddrs(c, i, "orders")) != 0 {
				return false
			}
		}
		return true
	})
}

// A node that starts again loads the running nodes' data before it serves.
func TestClusterRestartedNodeLoadsPeers(t *testing.T) {
	c := newCluster(t, nacostest.WithSyncDelay(50*time.Millisecond))
	prov := clusterClient(t, c, 0)
	mustRegister(t, prov, registerParam("orders", "10.0.0.1", 8080))
	eventually(t, "node 1 to hold the copy", func() bool { return len(viewAddrs(c, 1, "orders")) == 1 })
	c.Node(1).Stop()
	if got := viewAddrs(c, 1, "orders"); len(got) != 0 {
		t.Fatalf("a stopped node lists %v", got)
	}
	if err := c.Node(1).Start(); err != nil {
		t.Fatal(err)
	}
	if got := viewAddrs(c, 1, "orders"); !slices.Equal(got, []string{"10.0.0.1:8080"}) {
		t.Fatalf("node 1 right after Start lists %v, want the provider loaded from its peers", got)
	}
}

func TestNewClusterBadInput(t *testing.T) {
	for _, tc := range []struct {
		name string
		n    int
		opt  nacostest.ClusterOption
		want string
	}{
		{"no nodes", 0, nil, "want 1 to 9"},
		{"ten nodes", 10, nil, "want 1 to 9"},
		{"negative delay", 3, nacostest.WithSyncDelay(-time.Second), "WithSyncDelay"},
		{"zero expiry", 3, nacostest.WithSyncedExpiry(0), "WithSyncedExpiry"},
		{"addr", 3, nacostest.WithNodeOptions(nacostest.WithAddr("127.0.0.1:0"), nacostest.WithAddr("127.0.0.1:8848")), "WithAddr"},
	} {
		c, err := nacostest.NewCluster(tc.n, tc.opt)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			if c != nil {
				c.Close()
			}
			t.Errorf("%s: NewCluster = %v, want an error mentioning %q", tc.name, err, tc.want)
		}
	}
}
