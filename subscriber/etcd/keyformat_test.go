package etcd_test

import (
	"testing"

	"github.com/rebound-go/rebound/subscriber"
	etcdreg "github.com/rebound-go/rebound/subscriber/etcd"
)

// TestInstanceKeyFormat pins the default layout's key and value of an
// instance, as the package doc describes them.
func TestInstanceKeyFormat(t *testing.T) {
	key := subscriber.Key{Service: "orders"}
	inst := subscriber.Instance{IP: "10.0.1.7", Port: 8080, Weight: 1, Healthy: true, Enabled: true}
	k, err := etcdreg.InstanceKey(etcdreg.DefaultPrefix, key, etcdreg.InstanceID(inst))
	if err != nil {
		t.Fatal(err)
	}
	v, err := etcdreg.EncodeInstance(inst)
	if err != nil {
		t.Fatal(err)
	}
	if want := "/rebound/services/public/DEFAULT_GROUP/orders/10.0.1.7:8080"; k != want {
		t.Errorf("key = %q, want %q", k, want)
	}
	if want := `{"id":"10.0.1.7:8080","ip":"10.0.1.7","port":8080,"weight":1,"healthy":true,"enabled":true,"ephemeral":false,"cluster":"DEFAULT"}`; string(v) != want {
		t.Errorf("value = %s, want %s", v, want)
	}
}
