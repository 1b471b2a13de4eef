//go:build !race

package nacos_test

// The test here closes the nacos-sdk-go client while its first redo may
// still be running: the adapter's probe for a closed client is a request,
// and RpcClient.Request in nacos-sdk-go v2.3.2 formats "client not
// connected, current status:%s" with a plain read of rpcClientStatus while
// the redo's failing request changes it atomically (the upstream race
// described in e2e_reconnect_test.go). It does not involve this module's
// code, so the test is excluded from -race builds.

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/nacos"
)

// Closing the SDK client before the Manager stops the subscriptions with
// rebound.ErrClosed, as documented, instead of leaving them
// "retrying: registry connection lost" for good. Real client, in-process
// server; the client is shut down, never reconnected.
func TestClosedSDKClientStopsSubscriptions(t *testing.T) {
	srv := newServer(t)
	client := newClient(t, srv)
	reg, err := nacos.New(client, nacos.WithLogger(zaptest.NewLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	m, err := subscriber.New(reg, subscriber.WithPolicy(e2ePolicy), subscriber.WithLogger(zaptest.NewLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	var subs []*subscriber.Subscription
	for _, svc := range []string{"orders", "users"} {
		s, err := m.Subscribe(context.Background(), subscriber.Key{Service: svc}, func([]subscriber.Instance) {})
		if err != nil {
			t.Fatal(err)
		}
		subs = append(subs, s)
	}
	for _, s := range subs {
		select {
		case <-s.Ready():
		case <-time.After(e2eTimeout):
			t.Fatalf("%v not subscribed within %v: %+v", s.Status().Key, e2eTimeout, s.Status())
		}
	}
	start := time.Now()
	client.CloseClient()
	for _, s := range subs {
		select {
		case <-s.Done():
		case <-time.After(e2eTimeout):
			st := s.Status()
			t.Fatalf("%v still running %v after CloseClient: state %v, last error %v; want stopped with ErrRegistryClosed",
				s.Status().Key, e2eTimeout, st.State, st.LastErr)
		}
		if err := s.Err(); !errors.Is(err, rebound.ErrClosed) || !errors.Is(err, nacos.ErrClosed) {
			t.Fatalf("%v stopped with %v, want rebound.ErrClosed (nacos.ErrClosed)", s.Status().Key, err)
		}
	}
	t.Logf("subscriptions stopped %v after CloseClient", time.Since(start).Round(time.Millisecond))
}
