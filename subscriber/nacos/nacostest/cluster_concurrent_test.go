package nacostest_test

import (
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/rebound-go/rebound/subscriber/nacos/nacostest"
)

// TestClusterConcurrentStopStartDuringSync: nodes stopped and started
// at once, from several goroutines, while a client's registrations are
// being copied: no deadlock, no race, and in the end every node lists
// the client's latest instance (it lives on a running node).
func TestClusterConcurrentStopStartDuringSync(t *testing.T) {
	c := newCluster(t, nacostest.WithSyncDelay(time.Millisecond), nacostest.WithSyncedExpiry(50*time.Millisecond))
	prov := clusterClient(t, c, 0)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			p := registerParam("orders", "10.0.0.1", 8080)
			p.Metadata = map[string]string{"v": strconv.Itoa(i)}
			_, _ = prov.RegisterInstance(p)
			time.Sleep(time.Millisecond)
		}
	})
	for round := range 10 {
		var nw sync.WaitGroup
		for _, i := range []int{1, 2} {
			nw.Go(func() {
				c.Node(i).Stop()
				if err := c.Node(i).Start(); err != nil {
					t.Errorf("round %d: node %d Start: %v", round, i, err)
				}
			})
		}
		nw.Wait()
	}
	close(stop)
	wg.Wait()
	eventually(t, "every node to list the provider's latest instance", func() bool {
		want := c.Instances(0, "", "", "orders")
		for i := range 3 {
			got := c.Instances(i, "", "", "orders")
			if len(got) != 1 || len(want) != 1 || got[0].Metadata["v"] != want[0].Metadata["v"] {
				return false
			}
		}
		return true
	})
}
