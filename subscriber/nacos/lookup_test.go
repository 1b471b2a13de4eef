package nacos_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/nacos-group/nacos-sdk-go/v2/clients"
	"github.com/nacos-group/nacos-sdk-go/v2/common/constant"
	"github.com/nacos-group/nacos-sdk-go/v2/vo"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/nacos"
	"github.com/rebound-go/rebound/subscriber/nacos/nacostest"
)

// TestLookupReadsTheServer: Lookup reads the server's list over the
// adapter's own connection, without the SDK's cache, so it sees what a
// subscription whose push was lost does not.
func TestLookupReadsTheServer(t *testing.T) {
	srv, err := nacostest.NewServer()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	cfg := nacostest.ClientConfig(t)
	cfg.TimeoutMs = 2000
	client, err := clients.NewNamingClient(vo.NacosClientParam{
		ClientConfig:  cfg,
		ServerConfigs: []constant.ServerConfig{srv.ServerConfig()},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.CloseClient)
	reg, err := nacos.New(client)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.Close() })
	add := func(ip string, enable bool) {
		t.Helper()
		if err := srv.RegisterInstance("", "", "orders", nacostest.Instance{Ip: ip, Port: 8080, Weight: 1, Healthy: true, Enable: enable}); err != nil {
			t.Fatal(err)
		}
	}
	add("10.0.0.1", true)
	add("10.0.0.9", false) // disabled: subscribers never see it
	key := subscriber.Key{Service: "orders"}
	ips := func() []string {
		t.Helper()
		l, err := reg.Lookup(context.Background(), key)
		if err != nil {
			t.Fatalf("Lookup: %v", err)
		}
		var out []string
		for _, in := range l {
			out = append(out, in.IP)
		}
		slices.Sort(out)
		return out
	}
	if got := ips(); !slices.Equal(got, []string{"10.0.0.1"}) {
		t.Fatalf("Lookup = %v, want [10.0.0.1]", got)
	}
	before := srv.Stats().Requests[nacostest.RequestServiceQuery]
	add("10.0.0.2", true)
	if got := ips(); !slices.Equal(got, []string{"10.0.0.1", "10.0.0.2"}) {
		t.Fatalf("Lookup after a change = %v", got)
	}
	if n := srv.Stats().Requests[nacostest.RequestServiceQuery] - before; n != 1 {
		t.Errorf("one Lookup made %d ServiceQueryRequests, want 1", n)
	}
	if n := srv.SubscriberCount("", "", "orders"); n != 0 {
		t.Errorf("Lookup subscribed (%d subscribers)", n)
	}

	// A rejection the SDK reports as success is an error.
	if err := srv.SetRejection(nacostest.RequestServiceQuery, nacostest.Rejection{Fraction: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Lookup(context.Background(), key); !errors.Is(err, nacos.ErrRejected) || !strings.HasPrefix(err.Error(), "nacos: lookup ") {
		t.Fatalf("Lookup while rejected = %v, want the lookup's error wrapping ErrRejected", err)
	}
	srv.ClearFaults()

	if _, err := reg.Lookup(context.Background(), subscriber.Key{Service: ""}); !errors.Is(err, nacos.ErrInvalidKey) {
		t.Errorf("Lookup of an empty service = %v, want ErrInvalidKey", err)
	}
	_ = reg.Close()
	if _, err := reg.Lookup(context.Background(), key); !errors.Is(err, rebound.ErrClosed) {
		t.Errorf("Lookup after Close = %v, want ErrClosed", err)
	}
}

func TestLookupNeedsTheClientConfiguration(t *testing.T) {
	r := newRegistry(t, newFakeSDK())
	_, err := r.Lookup(context.Background(), subscriber.Key{Service: "orders"})
	if !errors.Is(err, nacos.ErrLookupUnsupported) || !rebound.IsPermanent(err) {
		t.Fatalf("Lookup over a client without configuration = %v, want a permanent ErrLookupUnsupported", err)
	}
}
