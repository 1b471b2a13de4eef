package reboundkratos

import (
	"context"
	"slices"
	"strconv"
	"testing"

	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/subscribertest"
)

func benchDiscovery(tb testing.TB, first []subscriber.Instance) *Discovery {
	reg := subscribertest.New()
	reg.Set(subscriber.Key{Service: "orders.grpc"}, first...)
	m, err := subscriber.New(reg)
	if err != nil {
		tb.Fatal(err)
	}
	d, err := NewDiscovery(m, FormatNacos)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		_ = d.Close()
		_ = m.Close()
	})
	if l, err := d.GetService(context.Background(), "orders.grpc"); err != nil || len(l) != len(first) {
		tb.Fatalf("GetService: %d instances, %v", len(l), err)
	}
	return d
}

// lists returns two sorted lists of n instances that differ in the
// version of the last one: every delivery is a change of one instance.
func lists(n int) [2][]subscriber.Instance {
	var out [2][]subscriber.Instance
	for k := range out {
		for i := range n {
			v := "v1"
			if i == n-1 && k == 1 {
				v = "v2"
			}
			out[k] = append(out[k], subscriber.Instance{ID: strconv.Itoa(i), IP: "10.0.0.1", Port: uint64(10000 + i),
				Weight: 100, Healthy: true, Enabled: true, Cluster: "DEFAULT",
				Metadata: map[string]string{"kind": "grpc", "version": v}})
		}
	}
	return out
}

// watchAndDeliver runs one Watch and its first Next (the current list),
// then deliveries of the Manager's lists (what the watcher's goroutine
// does with each new list of its View) each read by one Next, then Stop.
func watchAndDeliver(tb testing.TB, d *Discovery, ls [2][]subscriber.Instance, deliveries int) {
	rw, err := d.Watch(context.Background(), "orders.grpc")
	if err != nil {
		tb.Fatal(err)
	}
	w := rw.(*watcher)
	if l, err := w.Next(); err != nil || len(l) != len(ls[0]) {
		tb.Fatalf("first Next: %d instances, %v", len(l), err)
	}
	for i := range deliveries {
		w.deliver(ls[i%2])
		if l, err := w.Next(); err != nil || len(l) != len(ls[0]) {
			tb.Fatalf("Next: %d instances, %v", len(l), err)
		}
	}
	_ = w.Stop()
}

// TestNextAllocs: a delivery and its Next allocate kratos' list and the
// ServiceInstance of the one instance that changed; nothing per
// unchanged instance.
func TestNextAllocs(t *testing.T) {
	ls := lists(100)
	d := benchDiscovery(t, ls[1])
	rw, _ := d.Watch(context.Background(), "orders.grpc")
	defer rw.Stop()
	w := rw.(*watcher)
	_, _ = w.Next()
	i := 0
	allocs := testing.AllocsPerRun(1000, func() {
		w.deliver(ls[i%2])
		_, _ = w.Next()
		i++
	})
	t.Logf("allocations per delivery + Next, 100 instances, one changed: %.1f", allocs)
	// The list + the changed instance (ServiceInstance, its Endpoints
	// slice, the endpoint string and its host:port and port strings).
	if allocs > 7 {
		t.Fatalf("%.1f allocations per delivery + Next, want at most 7", allocs)
	}
}

// BenchmarkWatchNext1000: one Watch, 1,000 deliveries each read by Next,
// Stop; 100 instances, one changed per delivery.
func BenchmarkWatchNext1000(b *testing.B) {
	ls := lists(100)
	d := benchDiscovery(b, ls[1])
	b.ReportAllocs()
	for b.Loop() {
		watchAndDeliver(b, d, ls, 1000)
	}
}

// BenchmarkGetService: GetService of a 100-instance service, from memory.
func BenchmarkGetService(b *testing.B) {
	d := benchDiscovery(b, lists(100)[1])
	ctx := context.Background()
	if l, err := d.GetService(ctx, "orders.grpc"); err != nil || len(l) != 100 {
		b.Fatalf("GetService: %d, %v", len(l), err)
	}
	b.ReportAllocs()
	for b.Loop() {
		l, err := d.GetService(ctx, "orders.grpc")
		if err != nil || len(l) != 100 {
			b.Fatal(len(l), err)
		}
	}
}

// BenchmarkBaselineClone100 is what GetService would cost if it copied
// the list (as a reader that must own its slice does): a copy of a
// 100-pointer slice, for comparison in the same run.
func BenchmarkBaselineClone100(b *testing.B) {
	d := benchDiscovery(b, lists(100)[1])
	src, _ := d.GetService(context.Background(), "orders.grpc")
	b.ReportAllocs()
	for b.Loop() {
		if l := slices.Clone(src); len(l) != 100 {
			b.Fatal(len(l))
		}
	}
}
