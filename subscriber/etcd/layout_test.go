package etcd_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/subscriber"
	etcdreg "github.com/rebound-go/rebound/subscriber/etcd"
)

func TestLayout(t *testing.T) {
	for _, tc := range []struct {
		key  subscriber.Key
		want string
	}{
		{subscriber.Key{Service: "orders"}, "/p/public/DEFAULT_GROUP/orders/"},
		{subscriber.Key{Namespace: "dev", Group: "g", Service: "orders", Clusters: []string{"a"}}, "/p/dev/g/orders/"},
	} {
		got, err := etcdreg.ServicePrefix("/p", tc.key)
		if err != nil || got != tc.want {
			t.Errorf("ServicePrefix(%+v) = %q, %v; want %q", tc.key, got, err, tc.want)
		}
	}
	for _, tc := range []struct {
		key subscriber.Key
		id  string
		arg string
	}{
		{subscriber.Key{}, "x", "key.Service"},
		{subscriber.Key{Service: "a/b"}, "x", "key.Service"},
		{subscriber.Key{Namespace: "n/", Service: "s"}, "x", "key.Namespace"},
		{subscriber.Key{Group: "/g", Service: "s"}, "x", "key.Group"},
		{subscriber.Key{Service: "s"}, "", "id"},
		{subscriber.Key{Service: "s"}, "a/b", "id"},
	} {
		_, err := etcdreg.InstanceKey("/p", tc.key, tc.id)
		var ae *rebound.ArgumentError
		if !errors.As(err, &ae) || ae.Arg != tc.arg || !errors.Is(err, rebound.ErrInvalidArgument) {
			t.Errorf("InstanceKey(%+v, %q) = %v, want an ArgumentError naming %s", tc.key, tc.id, err, tc.arg)
		}
	}
	if id := etcdreg.InstanceID(subscriber.Instance{IP: "::1", Port: 80}); id != "[::1]:80" {
		t.Errorf("InstanceID = %q", id)
	}
	if id := etcdreg.InstanceID(subscriber.Instance{ID: "i-1", IP: "10.0.0.1", Port: 80}); id != "i-1" {
		t.Errorf("InstanceID = %q", id)
	}
}

func TestEncodeDecodeInstance(t *testing.T) {
	in := subscriber.Instance{ID: "i-1", IP: "10.0.0.1", Port: 80, Weight: 0.5, Healthy: true, Enabled: true,
		Ephemeral: true, Metadata: map[string]string{"a": "b"}}
	data, err := etcdreg.EncodeInstance(in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := etcdreg.DecodeInstance("from-key", data)
	if err != nil {
		t.Fatal(err)
	}
	want := in
	want.ID, want.Cluster = "from-key", etcdreg.DefaultCluster // the key decides the ID; empty cluster is DEFAULT
	if fmt.Sprint(out) != fmt.Sprint(want) {
		t.Fatalf("round trip = %+v, want %+v", out, want)
	}
	if _, err := etcdreg.EncodeInstance(subscriber.Instance{Port: 80}); !errors.Is(err, rebound.ErrInvalidArgument) {
		t.Errorf("EncodeInstance without IP = %v, want ErrInvalidArgument", err)
	}
	for _, bad := range []string{"", "null", "[]", `{"port":80}`, `{"ip":"10.0.0.1","port":"x"}`} {
		if _, err := etcdreg.DecodeInstance("x", []byte(bad)); err == nil {
			t.Errorf("DecodeInstance(%q) succeeded", bad)
		}
	}
}

func TestOptionsAreValidated(t *testing.T) {
	c := newCluster(t, 1)
	cli := newClient(t, c)
	if _, err := etcdreg.New(nil); !errors.Is(err, rebound.ErrInvalidArgument) {
		t.Errorf("New(nil) = %v", err)
	}
	for _, tc := range []struct {
		opt etcdreg.Option
		arg string
	}{
		{etcdreg.WithPrefix(""), "prefix"},
		{etcdreg.WithPrefix("/a/"), "prefix"},
		{etcdreg.WithAttemptTimeout(0), "d"},
	} {
		_, err := etcdreg.New(cli, nil, tc.opt) // a nil Option is ignored
		var ae *rebound.ArgumentError
		if !errors.As(err, &ae) || ae.Arg != tc.arg {
			t.Errorf("New with a bad option = %v, want an ArgumentError naming %s", err, tc.arg)
		}
	}
}
