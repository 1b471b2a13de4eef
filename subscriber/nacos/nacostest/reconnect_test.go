//go:build !race

// These tests make nacos-sdk-go clients reconnect, or run their reconnect
// path (a request that fails three times marks the client unhealthy, and the
// reconnect goroutine health-checks it back). nacos-sdk-go v2.3.2 has data
// races there (rpc_client.go: reconnect writes RpcClient.currentConnection
// and stores rpcClientStatus while notifyConnectionEvent and Request read
// them unsynchronized from other goroutines; upstream issue 833), so under
// the race detector they fail in the SDK, not in nacostest. They are
// excluded from -race builds; everything else in this package runs there.

package nacostest_test

import (
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nacos-group/nacos-sdk-go/v2/model"
	"github.com/nacos-group/nacos-sdk-go/v2/vo"

	"github.com/rebound-go/rebound/subscriber/nacos/nacostest"
)

// history records every list a callback receives, in order.
type history struct {
	mu    sync.Mutex
	lists [][]string
}

func (h *history) callback(ins []model.Instance, _ error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.lists = append(h.lists, addrs(ins))
}

func (h *history) last() ([]string, int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.lists) == 0 {
		return nil, 0
	}
	return h.lists[len(h.lists)-1], len(h.lists)
}

func (h *history) waitLast(t *testing.T, want ...string) {
	t.Helper()
	slices.Sort(want)
	defer func() {
		if t.Failed() {
			h.mu.Lock()
			t.Logf("callback lists so far, oldest first: %q", h.lists)
			h.mu.Unlock()
		}
	}()
	eventually(t, "callback list "+strings.Join(want, ","), func() bool {
		last, n := h.last()
		return n > 0 && slices.Equal(last, want)
	})
}

// TestRestartRedo: after Stop and Start on the same address, the client
// reconnects, and its redo re-registers its instance and resubscribes; a
// later change is pushed to it (lastRefTime kept increasing across the
// restart, or the client would drop the push as stale).
func TestRestartRedo(t *testing.T) {
	srv := newServer(t)
	client := newClient(t, srv, "")
	mustRegister(t, client, registerParam("self", "10.0.0.1", 80))

	var self, other history
	if err := client.Subscribe(&vo.SubscribeParam{ServiceName: "self", SubscribeCallback: self.callback}); err != nil {
		t.Fatal(err)
	}
	if err := client.Subscribe(&vo.SubscribeParam{ServiceName: "other", SubscribeCallback: other.callback}); err != nil {
		t.Fatal(err)
	}
	self.waitLast(t, "10.0.0.1:80")

	srv.Stop()
	if n := len(srv.Instances("", "", "self")); n != 0 {
		t.Fatalf("%d instances survived Stop", n)
	}
	eventually(t, "client to notice the outage", func() bool { return !client.ServerHealthy() })

	if err := srv.Start(); err != nil {
		t.Fatalf("Start: %v", err)
	}
	eventually(t, "client to reconnect", client.ServerHealthy)
	eventually(t, "redo to re-register and resubscribe", func() bool {
		return len(srv.Instances("", "", "self")) == 1 &&
			srv.SubscriberCount("", "", "self") == 1 &&
			srv.SubscriberCount("", "", "other") == 1
	})
	self.waitLast(t, "10.0.0.1:80")

	if err := srv.RegisterInstance("", "", "other", nacostest.Instance{Ip: "10.0.0.9", Port: 9, Enable: true}); err != nil {
		t.Fatal(err)
	}
	other.waitLast(t, "10.0.0.9:9")
	if st := srv.Stats(); st.ConnectionsOpened != 2 {
		t.Errorf("ConnectionsOpened = %d, want 2", st.ConnectionsOpened)
	}
}

// TestDropStreamsReconnect: every client opens a new connection and redoes
// its registrations and subscriptions.
func TestDropStreamsReconnect(t *testing.T) {
	srv := newServer(t)
	provider := newClient(t, srv, "")
	consumer := newClient(t, srv, "")
	mustRegister(t, provider, registerParam("svc", "10.0.0.1", 80))
	var h history
	if err := consumer.Subscribe(&vo.SubscribeParam{ServiceName: "svc", SubscribeCallback: h.callback}); err != nil {
		t.Fatal(err)
	}
	h.waitLast(t, "10.0.0.1:80")

	if n := srv.DropStreams(); n != 2 {
		t.Fatalf("DropStreams = %d, want 2", n)
	}
	eventually(t, "both clients to reconnect and redo", func() bool {
		st := srv.Stats()
		return st.ConnectionsOpened == 4 && st.Connections == 2 &&
			len(srv.Instances("", "", "svc")) == 1 && srv.SubscriberCount("", "", "svc") == 1
	})
	// Not checked here: that the consumer's callback shows 10.0.0.1:80
	// again. nacos-sdk-go v2.3.2 does not guarantee it: its redo applies
	// the SubscribeServiceResponse (connection_event_listener.go
	// redoSubscribe -> ProcessService) in the event goroutine while the
	// new stream's goroutine applies the push that follows, and
	// ProcessService compares lastRefTime and then stores without a lock,
	// so the older response (empty when the provider had not re-registered
	// yet) can overwrite the newer list and be the last callback, for good
	// (AsyncUpdateService is off by default: nothing re-reads the server).
	// Seen twice in loaded full runs; the second one logged the lists
	// [10.0.0.1:80] [10.0.0.1:80] [] (the first two: the same race between
	// the first Subscribe's response and its push). What the server does
	// is checked above; that the consumer is subscribed again on its new
	// connection is checked below with a change, whose push is newer than
	// anything the SDK holds.
	mustRegister(t, provider, registerParam("svc", "10.0.0.2", 80))
	h.waitLast(t, "10.0.0.2:80")
}

// TestRefuseThenAccept: a client started while the server refuses
// connections is not connected and its Subscribe fails; once the server
// accepts again, the client connects by itself and the SDK's redo delivers
// the subscription that had failed, without a new Subscribe call.
func TestRefuseThenAccept(t *testing.T) {
	srv := newServer(t)
	if err := srv.RegisterInstance("", "", "svc", nacostest.Instance{Ip: "10.0.0.1", Port: 1, Enable: true}); err != nil {
		t.Fatal(err)
	}
	srv.SetRefuseConnections(true)
	client := newClient(t, srv, "")
	var h history
	if err := client.Subscribe(&vo.SubscribeParam{ServiceName: "svc", SubscribeCallback: h.callback}); err == nil {
		t.Fatal("Subscribe succeeded while the server refuses connections")
	}
	if client.ServerHealthy() {
		t.Fatal("client healthy while refused")
	}

	srv.SetRefuseConnections(false)
	eventually(t, "client to connect", client.ServerHealthy)
	h.waitLast(t, "10.0.0.1:1")
}

// TestRefuseAndDrop: refusing plus dropping streams keeps every client out
// until the server accepts again.
func TestRefuseAndDrop(t *testing.T) {
	srv := newServer(t)
	client := newClient(t, srv, "")
	mustRegister(t, client, registerParam("svc", "10.0.0.1", 1))

	srv.SetRefuseConnections(true)
	srv.DropStreams()
	eventually(t, "client to be refused", func() bool {
		return !client.ServerHealthy() && srv.Stats().ConnectionsRefused > 0 && srv.ConnectionCount() == 0
	})
	if n := len(srv.Instances("", "", "svc")); n != 0 {
		t.Errorf("%d instances outlived their connection", n)
	}
	srv.SetRefuseConnections(false)
	eventually(t, "client to come back and re-register", func() bool {
		return client.ServerHealthy() && len(srv.Instances("", "", "svc")) == 1
	})
}

// TestUnregisteredErrorReconnects: errorCode 301 makes the SDK open a new
// connection.
func TestUnregisteredErrorReconnects(t *testing.T) {
	srv := newServer(t)
	client := newClient(t, srv, "")
	if err := srv.SetRequestError(nacostest.RequestSubscribeService, nacostest.ErrorCodeUnregistered); err != nil {
		t.Fatal(err)
	}
	var h history
	if err := client.Subscribe(&vo.SubscribeParam{ServiceName: "svc", SubscribeCallback: h.callback}); err == nil {
		t.Fatal("Subscribe succeeded")
	}
	eventually(t, "a new connection", func() bool { return srv.Stats().ConnectionsOpened >= 2 })
	srv.ClearFaults()
	eventually(t, "redo to subscribe", func() bool { return srv.SubscriberCount("", "", "svc") == 1 })
}

// TestSubscribeServerError: Subscribe returns the server's error. A request
// that fails three times marks the SDK client unhealthy and makes it run
// its reconnect path (health check, CONNECTED event, redo), where its
// status field is read without synchronization: hence this file.
func TestSubscribeServerError(t *testing.T) {
	srv := newServer(t)
	client := newClient(t, srv, "")
	if err := srv.SetRequestError(nacostest.RequestSubscribeService, 500); err != nil {
		t.Fatal(err)
	}
	var rec recorder
	err := client.Subscribe(&vo.SubscribeParam{ServiceName: "svc", SubscribeCallback: rec.callback})
	if err == nil || !strings.Contains(err.Error(), "injected error for SubscribeServiceRequest") {
		t.Fatalf("Subscribe error = %s, want the injected error", errText(err))
	}
	if n := srv.SubscriberCount("", "", "svc"); n != 0 {
		t.Errorf("SubscriberCount = %d, want 0", n)
	}
	if st := srv.Stats(); st.ErrorResponses < 1 || st.Requests[nacostest.RequestSubscribeService] < 1 {
		t.Errorf("stats = %+v", st)
	}
}

// TestServerErrorThenRecovery: while SubscribeServiceRequest fails, the
// SDK keeps re-sending it by itself (it treats the failed request as a
// broken connection, health-checks, declares itself connected again and
// redoes its cached subscriptions); when the fault clears, the subscription
// that returned an error is delivered without a new Subscribe call.
func TestServerErrorThenRecovery(t *testing.T) {
	srv := newServer(t)
	if err := srv.RegisterInstance("", "", "svc", nacostest.Instance{Ip: "10.0.0.1", Port: 1, Enable: true}); err != nil {
		t.Fatal(err)
	}
	client := newClient(t, srv, "")
	if err := srv.SetRequestError(nacostest.RequestSubscribeService, 500); err != nil {
		t.Fatal(err)
	}
	var h history
	if err := client.Subscribe(&vo.SubscribeParam{ServiceName: "svc", SubscribeCallback: h.callback}); err == nil {
		t.Fatal("Subscribe succeeded")
	}
	first := srv.Stats().Requests[nacostest.RequestSubscribeService]
	eventually(t, "the SDK to retry by itself", func() bool {
		return srv.Stats().Requests[nacostest.RequestSubscribeService] >= first+3
	})
	srv.ClearFaults()
	h.waitLast(t, "10.0.0.1:1")
}

// TestTimeout: a delay beyond ClientConfig.TimeoutMs makes requests fail;
// removing it lets the client recover.
func TestTimeout(t *testing.T) {
	srv := newServer(t)
	client := newClient(t, srv, "") // TimeoutMs 1000
	srv.SetDelay(3 * time.Second)
	var h history
	if err := client.Subscribe(&vo.SubscribeParam{ServiceName: "svc", SubscribeCallback: h.callback}); err == nil {
		t.Fatal("Subscribe succeeded despite a delay beyond the client timeout")
	}
	srv.SetDelay(0)
	eventually(t, "client to recover and redo the subscription", func() bool {
		return client.ServerHealthy() && srv.SubscriberCount("", "", "svc") == 1
	})
}

// TestOutage is a small version of the outage demo: several clients with
// several subscriptions and a registration each survive a restart.
func TestOutage(t *testing.T) {
	const clients, subs = 5, 10
	srv := newServer(t)
	var hs [clients][subs]history
	for i := range clients {
		c := newClient(t, srv, "")
		mustRegister(t, c, registerParam("svc-0", "10.0.1."+string(rune('1'+i)), 80))
		for j := range subs {
			if err := c.Subscribe(&vo.SubscribeParam{ServiceName: "svc-" + string(rune('0'+j)), SubscribeCallback: hs[i][j].callback}); err != nil {
				t.Fatal(err)
			}
		}
	}
	srv.Stop()
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "every client to reconnect and redo", func() bool {
		if srv.ConnectionCount() != clients || len(srv.Instances("", "", "svc-0")) != clients {
			return false
		}
		for j := range subs {
			if srv.SubscriberCount("", "", "svc-"+string(rune('0'+j))) != clients {
				return false
			}
		}
		return true
	})
	if err := srv.RegisterInstance("", "", "svc-9", nacostest.Instance{Ip: "10.0.0.9", Port: 9, Enable: true}); err != nil {
		t.Fatal(err)
	}
	for i := range clients {
		hs[i][9].waitLast(t, "10.0.0.9:9")
	}
}
