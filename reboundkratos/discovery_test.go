package reboundkratos_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-kratos/kratos/v2/registry"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/reboundkratos"
	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/subscribertest"
)

var fastPolicy = rebound.Policy{Initial: 50 * time.Millisecond, Max: 500 * time.Millisecond}

// memStack is an in-memory registry, a Manager and a Discovery.
type memStack struct {
	reg *subscribertest.Registry
	m   *subscriber.Manager
	d   *reboundkratos.Discovery
}

func newMemStack(t *testing.T, f reboundkratos.Format, opts ...reboundkratos.Option) *memStack {
	t.Helper()
	reg := subscribertest.New()
	m, err := subscriber.New(reg, subscriber.WithPolicy(fastPolicy))
	if err != nil {
		t.Fatal(err)
	}
	d, err := reboundkratos.NewDiscovery(m, f, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = d.Close()
		_ = m.Close()
	})
	return &memStack{reg: reg, m: m, d: d}
}

// nacosInst is an instance as kratos' contrib Nacos registry registers it.
func nacosInst(port int, version string) subscriber.Instance {
	return subscriber.Instance{ID: "127.0.0.1#" + strconv.Itoa(port), IP: "127.0.0.1", Port: uint64(port), Weight: 100,
		Healthy: true, Enabled: true, Ephemeral: true, Cluster: "DEFAULT",
		Metadata: map[string]string{"kind": "grpc", "version": version}}
}

// ports lists the ports of kratos' endpoints, in order.
func ports(list []*registry.ServiceInstance) string {
	var out []string
	for _, si := range list {
		for _, e := range si.Endpoints {
			out = append(out, e[strings.LastIndexByte(e, ':')+1:])
		}
	}
	return strings.Join(out, ",")
}

// nextAsync runs Next in a goroutine.
func nextAsync(w registry.Watcher) chan string {
	ch := make(chan string, 1)
	go func() {
		l, err := w.Next()
		if err != nil {
			ch <- "error: " + err.Error()
			return
		}
		ch <- "[" + ports(l) + "]"
	}()
	return ch
}

func recv(t *testing.T, ch chan string) string {
	t.Helper()
	synctest.Wait()
	select {
	case s := <-ch:
		return s
	default:
		return "(blocked)"
	}
}

var orders = subscriber.Key{Service: "orders.grpc"}

// TestWatchWhileRegistryDown: with the registry down, Watch returns at
// once without an error, and the first Next waits for the first list
// (kratos' resolver would fail the dial after 10 s on a Watch that blocks
// or fails); when the registry comes back the first list arrives.
func TestWatchWhileRegistryDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newMemStack(t, reboundkratos.FormatNacos)
		st.reg.SetDown(true)
		st.reg.Set(orders, nacosInst(9001, "v1"))
		w, err := st.d.Watch(context.Background(), "orders.grpc")
		if err != nil {
			t.Fatalf("Watch with the registry down: %v", err)
		}
		defer w.Stop()
		ch := nextAsync(w)
		time.Sleep(time.Minute)
		if got := recv(t, ch); got != "(blocked)" {
			t.Fatalf("first Next while down = %s, want it to wait", got)
		}
		st.reg.SetDown(false)
		time.Sleep(time.Minute)
		if got := recv(t, ch); got != "[9001]" {
			t.Fatalf("first Next after recovery = %s, want [9001]", got)
		}
	})
}

// TestNextEachChangeOnceInOrder: every list the Manager delivers reaches
// a watcher once, in order, even when the watcher reads them late; Next
// then blocks until the next change.
func TestNextEachChangeOnceInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newMemStack(t, reboundkratos.FormatNacos)
		st.reg.Set(orders, nacosInst(9001, "v1"))
		w, err := st.d.Watch(context.Background(), "orders.grpc")
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		synctest.Wait()
		lists := [][]subscriber.Instance{
			{nacosInst(9001, "v1"), nacosInst(9002, "v1")},
			{nacosInst(9002, "v1")},
			{nacosInst(9002, "v1"), nacosInst(9003, "v1")},
			{},
			{nacosInst(9004, "v1")},
		}
		for _, l := range lists {
			st.reg.Set(orders, l...)
			synctest.Wait()
		}
		want := []string{"[9001]", "[9001,9002]", "[9002]", "[9002,9003]", "[]", "[9004]"}
		for i, wnt := range want {
			if got := recv(t, nextAsync(w)); got != wnt {
				t.Fatalf("Next #%d = %s, want %s", i+1, got, wnt)
			}
		}
		ch := nextAsync(w)
		if got := recv(t, ch); got != "(blocked)" {
			t.Fatalf("Next with no change = %s, want it to block", got)
		}
		st.reg.Set(orders, nacosInst(9005, "v2"))
		if got := recv(t, ch); got != "[9005]" {
			t.Fatalf("Next after a change = %s, want [9005]", got)
		}
	})
}

// TestStopReleasesOnlyItsShare: two watchers of a name share one
// subscription; stopping one leaves the other hearing every change; the
// last Stop ends the subscription. (The contrib Nacos registry's Stop
// unsubscribes the client from the service: every other watcher of it
// goes deaf.)
func TestStopReleasesOnlyItsShare(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newMemStack(t, reboundkratos.FormatNacos)
		st.reg.Set(orders, nacosInst(9001, "v1"))
		w1, _ := st.d.Watch(context.Background(), "orders.grpc")
		w2, _ := st.d.Watch(context.Background(), "orders.grpc")
		synctest.Wait()
		if s, n := reboundkratos.ViewStats(st.d), reboundkratos.Watchers(st.d); s.Keys != 1 || n != 2 || s.Subscribes != 1 {
			t.Fatalf("stats with two watchers: %+v, %d watchers, want one shared subscription", s, n)
		}
		recv(t, nextAsync(w1))
		recv(t, nextAsync(w2))
		if err := w1.Stop(); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		st.reg.Set(orders, nacosInst(9002, "v1"))
		if got := recv(t, nextAsync(w2)); got != "[9002]" {
			t.Fatalf("the other watcher after one Stop: %s, want [9002]", got)
		}
		if _, err := w1.Next(); !errors.Is(err, reboundkratos.ErrWatcherStopped) || !errors.Is(err, context.Canceled) {
			t.Fatalf("Next after Stop: %v, want ErrWatcherStopped matching context.Canceled", err)
		}
		_ = w2.Stop()
		synctest.Wait()
		if s := reboundkratos.ViewStats(st.d); s.Keys != 0 || s.Unsubscribes != 1 {
			t.Fatalf("stats after the last Stop: %+v, want the subscription ended once", s)
		}
		if s := st.reg.Stats(); s.Unsubscribes != 1 {
			t.Fatalf("registry unsubscribes %d, want 1", s.Unsubscribes)
		}
	})
}

// TestNextErrorsOnlyOnStopOrCtx: a blocked Next returns context.Canceled
// when the watcher's ctx is cancelled (what kratos' resolver Close does),
// and the watcher releases its share on its own.
func TestNextErrorsOnlyOnStopOrCtx(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newMemStack(t, reboundkratos.FormatNacos)
		st.reg.SetDown(true)
		ctx, cancel := context.WithCancel(context.Background())
		w, _ := st.d.Watch(ctx, "orders.grpc")
		ch := nextAsync(w)
		time.Sleep(10 * time.Minute) // the registry stays down: no error
		if got := recv(t, ch); got != "(blocked)" {
			t.Fatalf("Next while down = %s, want it to block", got)
		}
		cancel()
		if got := recv(t, ch); !strings.Contains(got, "context canceled") {
			t.Fatalf("Next after cancel = %s, want context canceled", got)
		}
		if s, n := reboundkratos.ViewStats(st.d), reboundkratos.Watchers(st.d); s.Keys != 0 || n != 0 {
			t.Fatalf("stats after ctx end: %+v, %d watchers, want the share released", s, n)
		}
		_ = w.Stop()
	})
}

// TestGetServiceFromMemory: GetService waits for the first list once,
// then answers from memory: no registry request per call.
func TestGetServiceFromMemory(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newMemStack(t, reboundkratos.FormatNacos)
		st.reg.Set(orders, nacosInst(9001, "v1"), nacosInst(9002, "v2"))
		l, err := st.d.GetService(context.Background(), "orders.grpc")
		if err != nil || ports(l) != "9001,9002" {
			t.Fatalf("GetService = %s, %v", ports(l), err)
		}
		if l[0].Version != "v1" || l[1].Version != "v2" || l[0].Name != "orders.grpc" || l[0].Endpoints[0] != "grpc://127.0.0.1:9001" {
			t.Fatalf("instance %+v", *l[0])
		}
		// The slice is shared but capped: an append copies it.
		_ = append(l, &registry.ServiceInstance{ID: "x"})
		if again, _ := st.d.GetService(context.Background(), "orders.grpc"); len(again) != 2 || cap(again) != 2 {
			t.Fatalf("GetService after an append to its result: len %d cap %d", len(again), cap(again))
		}
		before := st.reg.Stats()
		for range 100 {
			if _, err := st.d.GetService(context.Background(), "orders.grpc"); err != nil {
				t.Fatal(err)
			}
		}
		if after := st.reg.Stats(); after != before {
			t.Fatalf("100 GetService calls reached the registry: %+v -> %+v", before, after)
		}
		st.reg.Set(orders, nacosInst(9003, "v1"))
		synctest.Wait()
		if l, _ := st.d.GetService(context.Background(), "orders.grpc"); ports(l) != "9003" {
			t.Fatalf("GetService after a change = %s", ports(l))
		}
		// A name whose registry is down: bounded by ctx.
		st.reg.SetDown(true)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if _, err := st.d.GetService(ctx, "payments.grpc"); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("GetService of an unknown name while down: %v, want DeadlineExceeded", err)
		}
	})
}

// TestNacosFilter: FormatNacos hands kratos healthy, enabled instances
// of positive weight (as the contrib registry's SelectInstances with
// HealthyOnly does); kind comes from the metadata, grpc by default.
func TestNacosFilter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newMemStack(t, reboundkratos.FormatNacos)
		sick, off, zero, http := nacosInst(9002, "v1"), nacosInst(9003, "v1"), nacosInst(9004, "v1"), nacosInst(9005, "v1")
		sick.Healthy, off.Enabled, zero.Weight = false, false, 0
		http.Metadata = map[string]string{"kind": "http"}
		bare := nacosInst(9006, "")
		bare.Metadata = nil
		st.reg.Set(orders, nacosInst(9001, "v1"), sick, off, zero, http, bare)
		l, err := st.d.GetService(context.Background(), "orders.grpc")
		if err != nil {
			t.Fatal(err)
		}
		var eps []string
		for _, si := range l {
			eps = append(eps, si.Endpoints...)
		}
		if got, want := strings.Join(eps, " "), "grpc://127.0.0.1:9001 http://127.0.0.1:9005 grpc://127.0.0.1:9006"; got != want {
			t.Fatalf("endpoints %s, want %s", got, want)
		}
	})
}

// TestMaxPending: a watcher that is not read keeps the latest lists.
func TestMaxPending(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newMemStack(t, reboundkratos.FormatNacos, reboundkratos.WithMaxPending(2))
		w, _ := st.d.Watch(context.Background(), "orders.grpc")
		defer w.Stop()
		for p := 9001; p <= 9005; p++ {
			st.reg.Set(orders, nacosInst(p, "v1"))
			synctest.Wait()
		}
		for _, want := range []string{"[9004]", "[9005]", "(blocked)"} {
			if got := recv(t, nextAsync(w)); got != want {
				t.Fatalf("Next = %s, want %s", got, want)
			}
		}
	})
}

// TestUnchangedInstancesReused: an instance that did not change keeps its
// *ServiceInstance across lists (no conversion per change).
func TestUnchangedInstancesReused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newMemStack(t, reboundkratos.FormatNacos)
		st.reg.Set(orders, nacosInst(9001, "v1"), nacosInst(9002, "v1"))
		w, _ := st.d.Watch(context.Background(), "orders.grpc")
		defer w.Stop()
		a, _ := w.Next()
		st.reg.Set(orders, nacosInst(9001, "v1"), nacosInst(9002, "v2"))
		b, _ := w.Next()
		if a[0] != b[0] || a[1] == b[1] || b[1].Version != "v2" {
			t.Fatalf("reuse: %p %p / %p %p (%s)", a[0], b[0], a[1], b[1], b[1].Version)
		}
	})
}

func TestDiscoveryBadInput(t *testing.T) {
	st := newMemStack(t, reboundkratos.FormatNacos)
	m := st.m
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"nil manager", func() error { _, err := reboundkratos.NewDiscovery(nil, reboundkratos.FormatNacos); return err }()},
		{"format 0", func() error { _, err := reboundkratos.NewDiscovery(m, 0); return err }()},
		{"WithMaxPending(0)", func() error {
			_, err := reboundkratos.NewDiscovery(m, reboundkratos.FormatNacos, reboundkratos.WithMaxPending(0))
			return err
		}()},
		{"WithKind(tcp)", func() error {
			_, err := reboundkratos.NewDiscovery(m, reboundkratos.FormatNacos, reboundkratos.WithKind("tcp"))
			return err
		}()},
		{"a key with an empty cluster", func() error {
			d, err := reboundkratos.NewDiscovery(m, reboundkratos.FormatNacos, reboundkratos.WithKeyFunc(func(name string) (subscriber.Key, error) {
				return subscriber.Key{Service: name, Clusters: []string{""}}, nil
			}))
			if err != nil {
				return err
			}
			defer d.Close()
			_, err = d.Watch(context.Background(), "orders")
			return err
		}()},
		{"a Registrar option", func() error {
			_, err := reboundkratos.NewDiscovery(m, reboundkratos.FormatNacos, reboundkratos.WithWeight(5))
			return err
		}()},
		{"etcd with group", func() error {
			_, err := reboundkratos.NewDiscovery(m, reboundkratos.FormatEtcd, reboundkratos.WithGroup("G"))
			return err
		}()},
		{"Watch empty name", func() error { _, err := st.d.Watch(context.Background(), ""); return err }()},
		{"Watch blank name", func() error { _, err := st.d.Watch(context.Background(), "  "); return err }()},
		{"GetService empty name", func() error { _, err := st.d.GetService(context.Background(), ""); return err }()},
		{"Watch nil ctx", func() error {
			//lint:ignore SA1012 a nil ctx is the bad input under test
			_, err := st.d.Watch(nil, "orders")
			return err
		}()},
	} {
		var ae *rebound.ArgumentError
		if !errors.As(tc.err, &ae) || !errors.Is(tc.err, rebound.ErrInvalidArgument) {
			t.Errorf("%s: %v, want a *rebound.ArgumentError", tc.name, tc.err)
			continue
		}
		t.Logf("%s: %v", tc.name, tc.err)
	}
	_ = st.d.Close()
	if _, err := st.d.Watch(context.Background(), "orders"); !errors.Is(err, rebound.ErrClosed) {
		t.Errorf("Watch after Close: %v, want ErrClosed", err)
	}
}

// TestFormatName: the formats' names (was ExampleFormat).
func TestFormatName(t *testing.T) {
	if got := reboundkratos.FormatName(reboundkratos.FormatNacos) + " " + reboundkratos.FormatName(reboundkratos.FormatEtcd); got != "nacos etcd" {
		t.Errorf("names = %q, want nacos etcd", got)
	}
}
