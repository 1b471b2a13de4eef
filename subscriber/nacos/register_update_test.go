package nacos_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/nacos-group/nacos-sdk-go/v2/clients/naming_client"
	"github.com/nacos-group/nacos-sdk-go/v2/vo"

	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/subscribertest"
)

// TestUpdateDefaultClusterIsTheEmptyOne: Register's doc calls an empty
// Cluster Nacos' "DEFAULT": an Update naming "DEFAULT" keeps the
// cluster. (It was refused as a change of cluster.)
func TestUpdateDefaultClusterIsTheEmptyOne(t *testing.T) {
	srv := newServer(t)
	c := newClient(t, srv)
	in := inst("10.0.0.1", 8080)
	g := mustRegisterNacos(t, c, subscriber.Key{Service: "orders"}, in, fastRegister...)
	in.Cluster, in.Weight = "DEFAULT", 3
	if err := g.Update(context.Background(), in); err != nil {
		t.Fatalf("Update with Cluster \"DEFAULT\" of an instance registered with \"\" = %v, want nil (the same cluster)", err)
	}
	if ins := srv.Instances("", "", "orders"); len(ins) != 1 || ins[0].Weight != 3 {
		t.Fatalf("server lists %+v, want the instance with weight 3", ins)
	}
	// And back: "" after "DEFAULT".
	in.Cluster = ""
	if err := g.Update(context.Background(), in); err != nil {
		t.Fatalf("Update with Cluster \"\" after \"DEFAULT\" = %v", err)
	}
}

// blockingRegister is a real client whose register requests wait, once
// armed, until the test releases them.
type blockingRegister struct {
	*naming_client.NamingClient
	armed    atomic.Bool
	entered  chan struct{}
	release  chan struct{}
	returned chan struct{} // the armed request was answered
}

func (c *blockingRegister) RegisterInstance(p vo.RegisterInstanceParam) (bool, error) {
	if c.armed.CompareAndSwap(true, false) {
		close(c.entered)
		<-c.release
		defer close(c.returned)
	}
	return c.NamingClient.RegisterInstance(p)
}

// TestFailedUpdateKeepsThePreviousInstance: an Update whose ctx ends
// while its request is in flight returns ctx's error; the request then
// completes, but the Registration keeps reporting and repairing the
// previous instance, as documented: the server lists it again after the
// check that follows. (The loop adopted the new instance: Instance()
// reported the old weight while the server kept the new one.)
func TestFailedUpdateKeepsThePreviousInstance(t *testing.T) {
	srv := newServer(t)
	c := &blockingRegister{NamingClient: newClient(t, srv).(*naming_client.NamingClient),
		entered: make(chan struct{}), release: make(chan struct{}), returned: make(chan struct{})}
	old := inst("10.0.0.1", 8080)
	g := mustRegisterNacos(t, c, subscriber.Key{Service: "orders"}, old, fastRegister...)
	c.armed.Store(true)
	ctx, cancel := context.WithCancel(context.Background())
	next := old
	next.Weight = 9
	errc := make(chan error, 1)
	go func() { errc <- g.Update(ctx, next) }()
	<-c.entered
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("Update whose ctx ended = %v, want context.Canceled", err)
	}
	close(c.release)
	<-c.returned // the server took weight 9
	subscribertest.Eventually(t, e2eTimeout, "the server to list the previous weight 1 again", func() bool {
		ins := srv.Instances("", "", "orders")
		return len(ins) == 1 && ins[0].Weight == 1
	})
	if got := g.Instance(); got.Weight != 1 {
		t.Fatalf("Instance().Weight = %v after a failed Update, want the previous 1", got.Weight)
	}
	// A later Update works as usual.
	if err := g.Update(context.Background(), next); err != nil {
		t.Fatal(err)
	}
	subscribertest.Eventually(t, e2eTimeout, "the server to list weight 9", func() bool {
		ins := srv.Instances("", "", "orders")
		return len(ins) == 1 && ins[0].Weight == 9 && g.Instance().Weight == 9
	})
}
