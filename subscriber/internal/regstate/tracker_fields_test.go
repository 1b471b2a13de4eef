package regstate

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/rebound-go/rebound/subscriber"
)

// TestTrackerKeepsEveryField: what Init and SetInstance are given comes
// back from Status, Key and Instance, field by field, however the Tracker
// keeps it (the seldom set namespace, clusters and instance ID too, and a
// registry name of no adapter).
func TestTrackerKeepsEveryField(t *testing.T) {
	key := subscriber.Key{Namespace: "ns", Group: "g", Service: "s", Clusters: []string{"a", "b"}}
	inst := subscriber.Instance{ID: "id-1", IP: "10.0.0.1", Port: 80, Weight: 2.5, Healthy: true, Enabled: true,
		Ephemeral: true, Cluster: "c", Metadata: map[string]string{"v": "1"}}
	before := time.Now()
	tr := New("other", key, inst, nil, nil)
	st := tr.Status()
	if st.Registry != "other" || !reflect.DeepEqual(st.Key, key) || !reflect.DeepEqual(st.Instance, inst) {
		t.Fatalf("Status = %+v, want registry other, key %+v, instance %+v", st, key, inst)
	}
	if st.State != subscriber.RegistrationRegistering || st.Since.Before(before.Truncate(time.Nanosecond)) || st.Since.After(time.Now()) || !st.LastErrAt.IsZero() {
		t.Fatalf("Status = %+v, want registering since Init, no LastErrAt", st)
	}
	key.Clusters[0] = "changed" // the Tracker's copy stays
	if k := tr.Key(); k.Clusters[0] != "a" {
		t.Fatalf("Key().Clusters = %v, want the Tracker's own copy", k.Clusters)
	}
	for _, id := range []string{"id-2", "", "id-3"} {
		inst.ID, inst.Weight = id, inst.Weight+1
		tr.SetInstance(inst)
		if got := tr.Instance(); !reflect.DeepEqual(got, inst) {
			t.Fatalf("Instance() = %+v, want %+v", got, inst)
		}
	}
	boom := errors.New("boom")
	tr.Attempt(OpRegister, time.Now(), boom)
	tr.Registered()
	tr.Repaired()
	tr.Set(subscriber.RegistrationRepairing, boom)
	tr.SetAttempts(3)
	st = tr.Status()
	if st.LastErr != boom || st.LastErrAt.IsZero() || st.Registrations != 1 || st.Repairs != 1 || st.Attempts != 3 ||
		st.State != subscriber.RegistrationRepairing || st.Key.Namespace != "ns" || st.Instance.ID != "id-3" {
		t.Fatalf("Status = %+v, want repairing after 1 registration and 1 repair, 3 attempts, LastErr boom", st)
	}
}
