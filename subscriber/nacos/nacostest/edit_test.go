package nacostest_test

import (
	"testing"

	"github.com/rebound-go/rebound/subscriber/nacos/nacostest"
)

// TestUpdateInstanceOutlivesRegistration: an operator's edit applies
// over what is registered at the address, and registering the instance
// again does not undo it (Nacos keeps it apart from the registration).
func TestUpdateInstanceOutlivesRegistration(t *testing.T) {
	srv := newServer(t)
	in := nacostest.Instance{Ip: "10.0.0.1", Port: 8080, Weight: 1, Healthy: true, Enable: true, Metadata: map[string]string{"v": "1"}}
	if err := srv.RegisterInstance("", "", "orders", in); err != nil {
		t.Fatal(err)
	}
	if err := srv.UpdateInstance("", "", "orders", nacostest.Instance{Ip: "10.0.0.1", Port: 8080, Weight: 5, Metadata: map[string]string{"op": "x"}}); err != nil {
		t.Fatal(err)
	}
	if err := srv.RegisterInstance("", "", "orders", in); err != nil { // registered again
		t.Fatal(err)
	}
	got := srv.Instances("", "", "orders")
	if len(got) != 1 || got[0].Enable || got[0].Weight != 5 || got[0].Metadata["v"] != "1" || got[0].Metadata["op"] != "x" {
		t.Fatalf("Instances = %+v, want the edit (disabled, weight 5, op=x) over the registration (v=1)", got)
	}
	if err := srv.UpdateInstance("", "", "", in); err == nil {
		t.Fatal("UpdateInstance with an empty service succeeded")
	}
}
