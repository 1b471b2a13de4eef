package etcd

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/rebound-go/rebound/subscriber"
)

const testPrefix = "/p/public/DEFAULT_GROUP/s/"

func kv(id string, rev int64, ip string) *mvccpb.KeyValue {
	v, err := EncodeInstance(subscriber.Instance{IP: ip, Port: 80})
	if err != nil {
		panic(err)
	}
	return &mvccpb.KeyValue{Key: []byte(testPrefix + id), Value: v, ModRevision: rev}
}

func put(id string, rev int64, ip string) *clientv3.Event {
	return &clientv3.Event{Type: mvccpb.PUT, Kv: kv(id, rev, ip)}
}

func del(id string, rev int64) *clientv3.Event {
	return &clientv3.Event{Type: mvccpb.DELETE, Kv: &mvccpb.KeyValue{Key: []byte(testPrefix + id), ModRevision: rev}}
}

// ips returns the sorted IPs of the state's list, each followed by a
// space.
func ips(st *state) string {
	var out []string
	for _, in := range st.list() {
		out = append(out, in.IP+" ")
	}
	slices.Sort(out)
	return strings.Join(out, "")
}

func TestStateAppliesEachRevisionOnce(t *testing.T) {
	st := newState(reboundLayout{prefix: strings.TrimSuffix(testPrefix, "/")}, testPrefix, nil, zap.NewNop())
	st.load(&clientv3.GetResponse{
		Header: &etcdserverpb.ResponseHeader{Revision: 10},
		Kvs:    []*mvccpb.KeyValue{kv("a", 5, "10.0.0.1"), kv("b", 9, "10.0.0.2")},
	})
	if got := ips(st); got != "10.0.0.1 10.0.0.2 " {
		t.Fatalf("after load: %q", got)
	}
	// Events at or below the loaded revision are already in the list.
	if st.apply([]*clientv3.Event{del("a", 10), put("c", 7, "10.0.0.3")}) {
		t.Fatal("old events changed the list")
	}
	// A transaction: two events of one revision, both applied.
	if !st.apply([]*clientv3.Event{put("c", 11, "10.0.0.3"), del("b", 11)}) {
		t.Fatal("a new revision changed nothing")
	}
	if got := ips(st); got != "10.0.0.1 10.0.0.3 " {
		t.Fatalf("after revision 11: %q", got)
	}
	// The same revision again (a duplicate after a resume) is skipped.
	if st.apply([]*clientv3.Event{del("c", 11)}) || ips(st) != "10.0.0.1 10.0.0.3 " {
		t.Fatal("a revision was applied twice")
	}
	// Keys below an instance and undecodable values are not instances;
	// an undecodable value replaces (removes) a valid one.
	deep := &clientv3.Event{Type: mvccpb.PUT, Kv: &mvccpb.KeyValue{Key: []byte(testPrefix + "a/x"), Value: []byte("{}"), ModRevision: 12}}
	junk := &clientv3.Event{Type: mvccpb.PUT, Kv: &mvccpb.KeyValue{Key: []byte(testPrefix + "a"), Value: []byte("junk"), ModRevision: 13}}
	st.apply([]*clientv3.Event{deep})
	st.apply([]*clientv3.Event{junk})
	if got := ips(st); got != "10.0.0.3 " {
		t.Fatalf("after junk: %q", got)
	}
	if st.rev != 13 {
		t.Fatalf("rev = %d, want 13", st.rev)
	}
}

func TestStateFiltersClusters(t *testing.T) {
	st := newState(reboundLayout{prefix: strings.TrimSuffix(testPrefix, "/")}, testPrefix, []string{"east"}, zap.NewNop())
	st.load(&clientv3.GetResponse{Header: &etcdserverpb.ResponseHeader{Revision: 1}})
	v, _ := EncodeInstance(subscriber.Instance{IP: "10.0.0.9", Cluster: "east"})
	east := &clientv3.Event{Type: mvccpb.PUT, Kv: &mvccpb.KeyValue{Key: []byte(testPrefix + "e"), Value: v, ModRevision: 3}}
	if st.apply([]*clientv3.Event{put("d", 2, "10.0.0.1")}) {
		t.Fatal("an instance of the DEFAULT cluster changed an east-only list")
	}
	if !st.apply([]*clientv3.Event{east}) || ips(st) != "10.0.0.9 " {
		t.Fatalf("east instance not listed: %q", ips(st))
	}
}

// BenchmarkWatchEvent measures what the watch goroutine does per change
// of a service with 100 instances: decode the value, apply the event,
// build the full list handed to the Manager (plus encoding the test's
// event).
func BenchmarkWatchEvent(b *testing.B) {
	st := newState(reboundLayout{prefix: strings.TrimSuffix(testPrefix, "/")}, testPrefix, nil, zap.NewNop())
	resp := &clientv3.GetResponse{Header: &etcdserverpb.ResponseHeader{Revision: 100}}
	for i := range 100 {
		resp.Kvs = append(resp.Kvs, kv(fmt.Sprint(i), int64(i+1), fmt.Sprintf("10.0.%d.%d", i/256, i%256)))
	}
	st.load(resp)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		ev := put(fmt.Sprint(i%100), int64(101+i), "10.1.0.1")
		if !st.apply([]*clientv3.Event{ev}) {
			b.Fatal("no change")
		}
		if len(st.list()) != 100 {
			b.Fatal("wrong list")
		}
	}
}
