package nacos_test

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/nacos-group/nacos-sdk-go/v2/clients/naming_client"
	"github.com/nacos-group/nacos-sdk-go/v2/vo"

	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/nacos"
	"github.com/rebound-go/rebound/subscriber/nacos/nacostest"
)

// listedAddrs returns the ip:port of every instance srv lists in service.
func listedAddrs(srv *nacostest.Server, service string) []string {
	var out []string
	for _, in := range srv.Instances("", "", service) {
		out = append(out, addr(in.Ip, in.Port))
	}
	return out
}

func addr(ip string, port uint64) string { return ip + ":" + strconv.FormatUint(port, 10) }

// settledClient returns a client of srv whose connection event has been
// handled. nacos-sdk-go handles a new connection's event on a goroutine
// of its own, later, by re-sending every instance it has cached; a test
// that replaces one instance by another on a fresh client could see that
// redo re-send the replaced one. The client is started while srv refuses
// connections, caches a sentinel instance, and is let in: once srv lists
// the sentinel, the redo is over (it re-sends what it cached when the
// event came, the sentinel alone). The sentinel is then deregistered.
func settledClient(t *testing.T, srv *nacostest.Server) naming_client.INamingClient {
	t.Helper()
	srv.SetRefuseConnections(true)
	c := newClient(t, srv)
	sentinel := vo.RegisterInstanceParam{Ip: "10.255.0.1", Port: 1, Weight: 1, Enable: true, Healthy: true,
		Ephemeral: true, ServiceName: "settle"}
	// Refused: the SDK caches the instance for its redo and fails.
	_, _ = c.RegisterInstance(sentinel)
	srv.SetRefuseConnections(false)
	eventually(t, e2eTimeout, "the client's redo of the sentinel after it connected", func() bool {
		return listed(srv, "settle", sentinel.Ip, sentinel.Port)
	})
	if _, err := c.DeregisterInstance(vo.DeregisterInstanceParam{Ip: sentinel.Ip, Port: sentinel.Port,
		Ephemeral: true, ServiceName: "settle"}); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestShutdownAfterCloseSparesALaterClosedRegistration: A is closed, B
// registers the same service on the same client and is closed in turn:
// the connection holds B's instance. A's Shutdown must send nothing (its
// instance was replaced), as its doc says; it deregistered B's, because
// the service's slot on the client was free again.
func TestShutdownAfterCloseSparesALaterClosedRegistration(t *testing.T) {
	srv := newServer(t)
	c := settledClient(t, srv)
	key := subscriber.Key{Service: "orders"}
	a := mustRegisterNacos(t, c, key, inst("10.0.0.1", 8080), fastRegister...)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	b := mustRegisterNacos(t, c, key, inst("10.0.0.2", 8080), fastRegister...)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), e2eTimeout)
	defer cancel()
	if err := a.Shutdown(ctx); err != nil {
		t.Fatalf("A.Shutdown = %v", err)
	}
	if got := listedAddrs(srv, "orders"); len(got) != 1 || got[0] != "10.0.0.2:8080" {
		t.Fatalf("after A.Close, B.Register, B.Close, A.Shutdown the server lists %v, want [10.0.0.2:8080] (B's, which B.Close leaves to the connection)", got)
	}
}

// TestRejectedRegisterSparesAClosedRegistration: A is closed (its
// instance stays while the connection lives); B's Register of the same
// service on the same client is rejected. B's cleanup must leave A's
// instance; it deregistered it (Nacos deregisters the connection's
// instance of the service, whatever address the request names).
func TestRejectedRegisterSparesAClosedRegistration(t *testing.T) {
	srv := newServer(t)
	// One client for both: the connection is what they share.
	c := rejectingClient(srv, settledClient(t, srv), "10.0.0.2")
	key := subscriber.Key{Service: "orders"}
	a := mustRegisterNacos(t, c, key, inst("10.0.0.1", 8080), fastRegister...)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	registerRejected(t, c, key, inst("10.0.0.2", 8080))
	if got := listedAddrs(srv, "orders"); len(got) != 1 || got[0] != "10.0.0.1:8080" {
		t.Fatalf("after A.Close and a rejected B.Register the server lists %v, want [10.0.0.1:8080] (A's)", got)
	}
	// A still owns the connection's instance: its Shutdown removes it.
	ctx, cancel := context.WithTimeout(context.Background(), e2eTimeout)
	defer cancel()
	if err := a.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if got := listedAddrs(srv, "orders"); len(got) != 0 {
		t.Fatalf("after A.Shutdown the server lists %v, want none", got)
	}
}

// rejectingRegister is a real client whose register request for one
// address (or the next one, armed) the server rejects (TPS control,
// which the SDK reports as success): the rejection is set just before
// that request, for its address only, so that the SDK's own redo of its
// first connection event cannot take it.
type rejectingRegister struct {
	*naming_client.NamingClient
	srv   *nacostest.Server
	ip    string
	armed atomic.Bool // reject the next register request, whatever its address
}

func (c *rejectingRegister) RegisterInstance(p vo.RegisterInstanceParam) (bool, error) {
	if c.armed.CompareAndSwap(true, false) || p.Ip == c.ip {
		if err := c.srv.SetRejection(nacostest.RequestInstance, nacostest.Rejection{FirstPerConnection: 1, IP: p.Ip}); err != nil {
			return false, err
		}
		defer func() { _ = c.srv.SetRejection(nacostest.RequestInstance, nacostest.Rejection{}) }()
	}
	return c.NamingClient.RegisterInstance(p)
}

func rejectingClient(srv *nacostest.Server, c naming_client.INamingClient, ip string) *rejectingRegister {
	return &rejectingRegister{NamingClient: c.(*naming_client.NamingClient), srv: srv, ip: ip}
}

// registerRejected registers in (the address c rejects) on c's service
// key and expects the server to reject it.
func registerRejected(t *testing.T, c *rejectingRegister, key subscriber.Key, in subscriber.Instance) {
	t.Helper()
	g, err := nacos.Register(context.Background(), c, key, in, fastRegister...)
	if !errors.Is(err, nacos.ErrRejected) {
		if g != nil {
			_ = g.Close()
		}
		t.Fatalf("Register of %s:%d under rejection = %v, want ErrRejected", in.IP, in.Port, err)
	}
}
