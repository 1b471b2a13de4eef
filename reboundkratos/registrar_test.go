package reboundkratos_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-kratos/kratos/v2/registry"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/reboundkratos"
	"github.com/rebound-go/rebound/subscriber"
)

// fakeRegs records what a Registrar registers.
type fakeRegs struct {
	mu          sync.Mutex
	live        map[string]subscriber.Instance // key + ip:port
	events      []string
	fail        error
	shutdownErr error
	closed      int
}

// fakeReg implements Shutdown, Close and Key, which the Registrar and
// subscriber.Drain call.
type fakeReg struct {
	subscriber.Registration
	f  *fakeRegs
	id string
}

func (g *fakeReg) Shutdown(context.Context) error {
	g.f.mu.Lock()
	defer g.f.mu.Unlock()
	if g.f.shutdownErr != nil {
		return g.f.shutdownErr
	}
	delete(g.f.live, g.id)
	g.f.events = append(g.f.events, "shutdown "+g.id)
	return nil
}

func (g *fakeReg) Close() error {
	g.f.mu.Lock()
	defer g.f.mu.Unlock()
	g.f.closed++
	return nil
}

func (g *fakeReg) Key() subscriber.Key { return subscriber.Key{Service: g.id} }

func (f *fakeRegs) register(_ context.Context, key subscriber.Key, inst subscriber.Instance) (subscriber.Registration, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return nil, f.fail
	}
	if f.live == nil {
		f.live = map[string]subscriber.Instance{}
	}
	id := key.String() + " " + inst.IP + ":" + strconv.FormatUint(inst.Port, 10)
	f.live[id] = inst
	f.events = append(f.events, "register "+id)
	return &fakeReg{f: f, id: id}, nil
}

func helloworld() *registry.ServiceInstance {
	return &registry.ServiceInstance{ID: "a1b2", Name: "helloworld", Version: "v1.0.0",
		Metadata:  map[string]string{"zone": "z1"},
		Endpoints: []string{"grpc://127.0.0.1:9000?isSecure=false", "http://127.0.0.1:8000?isSecure=false"}}
}

// TestRegistrarNacosLayout: one Nacos instance per endpoint, in service
// "<name>.<scheme>", with kind and version in the metadata, group and
// cluster as configured, as kratos' contrib Nacos registry writes them.
func TestRegistrarNacosLayout(t *testing.T) {
	var f fakeRegs
	r, err := reboundkratos.NewRegistrar(reboundkratos.FormatNacos, f.register, reboundkratos.WithDrainDelay(0),
		reboundkratos.WithGroup("G"), reboundkratos.WithCluster("C"))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Register(context.Background(), helloworld()); err != nil {
		t.Fatal(err)
	}
	g := f.live["G/helloworld.grpc 127.0.0.1:9000"]
	h := f.live["G/helloworld.http 127.0.0.1:8000"]
	if len(f.live) != 2 || g.Cluster != "C" || g.Weight != 100 || !g.Ephemeral || !g.Healthy || !g.Enabled {
		t.Fatalf("registered %+v", f.live)
	}
	if g.Metadata["kind"] != "grpc" || h.Metadata["kind"] != "http" || g.Metadata["version"] != "v1.0.0" || g.Metadata["zone"] != "z1" {
		t.Fatalf("metadata %v / %v", g.Metadata, h.Metadata)
	}
	if err := r.Deregister(context.Background(), helloworld()); err != nil {
		t.Fatal(err)
	}
	if len(f.live) != 0 {
		t.Fatalf("left after Deregister: %v", f.live)
	}
}

// TestRegistrarEtcdLayout: one key holding the JSON of the
// ServiceInstance, byte for byte what the contrib etcd registry writes
// (json.Marshal of registry.ServiceInstance), read back by FormatEtcd as
// the same ServiceInstance.
func TestRegistrarEtcdLayout(t *testing.T) {
	var f fakeRegs
	r, err := reboundkratos.NewRegistrar(reboundkratos.FormatEtcd, f.register, reboundkratos.WithDrainDelay(0))
	if err != nil {
		t.Fatal(err)
	}
	si := helloworld()
	if err := r.Register(context.Background(), si); err != nil {
		t.Fatal(err)
	}
	inst, ok := f.live["helloworld 127.0.0.1:9000"]
	if !ok || len(f.live) != 1 || inst.ID != "a1b2" {
		t.Fatalf("registered %+v", f.live)
	}
	l := reboundkratos.EtcdLayout("")
	prefix, err := l.ServicePrefix(subscriber.Key{Service: "helloworld"})
	if err != nil || prefix != "/microservices/helloworld/" {
		t.Fatalf("ServicePrefix = %q, %v", prefix, err)
	}
	id, value, err := l.Encode(inst)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(si)
	if id != "a1b2" || string(value) != string(want) {
		t.Fatalf("Encode = %q %s, want a1b2 %s", id, value, want)
	}
	// What the contrib registry stored, read back.
	back, err := l.Decode(id, want)
	if err != nil || back.IP != "127.0.0.1" || back.Port != 9000 || back.Metadata["zone"] != "z1" {
		t.Fatalf("Decode = %+v, %v", back, err)
	}
	synctest.Test(t, func(t *testing.T) {
		st := newMemStack(t, reboundkratos.FormatEtcd)
		st.reg.Set(subscriber.Key{Service: "helloworld"}, back)
		got, err := st.d.GetService(context.Background(), "helloworld")
		if err != nil || len(got) != 1 || !got[0].Equal(helloworld()) {
			t.Fatalf("GetService = %+v, %v; want %+v", got, err, si)
		}
	})
	if _, err := l.Decode("x", []byte(`{"id":"x","endpoints":["not a url"]}`)); err == nil {
		t.Fatal("Decode of a value with no host:port: no error")
	}
}

// TestDeregisterDrains: Deregister deregisters first, then waits the
// drain delay before it returns (kratos stops the servers then).
func TestDeregisterDrains(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var f fakeRegs
		r, _ := reboundkratos.NewRegistrar(reboundkratos.FormatEtcd, f.register, reboundkratos.WithDrainDelay(3*time.Second))
		if err := r.Register(context.Background(), helloworld()); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		done := make(chan error, 1)
		go func() { done <- r.Deregister(context.Background(), helloworld()) }()
		time.Sleep(time.Second)
		synctest.Wait()
		f.mu.Lock()
		left := len(f.live)
		f.mu.Unlock()
		if left != 0 {
			t.Fatal("instance still registered while draining")
		}
		select {
		case <-done:
			t.Fatal("Deregister returned before the drain delay")
		default:
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d != 3*time.Second {
			t.Fatalf("Deregister took %v, want the 3 s delay", d)
		}
		// A ctx that ends cuts the wait short; still nil, so App.Stop stops.
		_ = r.Register(context.Background(), helloworld())
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		start = time.Now()
		if err := r.Deregister(ctx, helloworld()); err != nil || time.Since(start) != time.Second {
			t.Fatalf("Deregister with a 1 s ctx: %v after %v", err, time.Since(start))
		}
	})
}

func TestRegistrarBadInput(t *testing.T) {
	var f fakeRegs
	r, _ := reboundkratos.NewRegistrar(reboundkratos.FormatEtcd, f.register)
	with := func(mod func(*registry.ServiceInstance)) *registry.ServiceInstance {
		si := helloworld()
		mod(si)
		return si
	}
	for _, tc := range []struct {
		name string
		si   *registry.ServiceInstance
	}{
		{"nil", nil},
		{"empty name", with(func(si *registry.ServiceInstance) { si.Name = "" })},
		{"blank name", with(func(si *registry.ServiceInstance) { si.Name = " " })},
		{"name with /", with(func(si *registry.ServiceInstance) { si.Name = "a/b" })},
		{"empty ID (etcd)", with(func(si *registry.ServiceInstance) { si.ID = "" })},
		{"no endpoints", with(func(si *registry.ServiceInstance) { si.Endpoints = nil })},
		{"not a URL", with(func(si *registry.ServiceInstance) { si.Endpoints = []string{"127.0.0.1:9000"} })},
		{"bad URL", with(func(si *registry.ServiceInstance) { si.Endpoints = []string{"grpc://[::1"} })},
		{"no port", with(func(si *registry.ServiceInstance) { si.Endpoints = []string{"grpc://127.0.0.1"} })},
		{"port 0", with(func(si *registry.ServiceInstance) { si.Endpoints = []string{"grpc://127.0.0.1:0"} })},
		{"unknown scheme", with(func(si *registry.ServiceInstance) { si.Endpoints = []string{"tcp://127.0.0.1:9000"} })},
		{"duplicate endpoints", with(func(si *registry.ServiceInstance) {
			si.Endpoints = []string{"grpc://127.0.0.1:9000", "grpc://127.0.0.1:9000?isSecure=false"}
		})},
	} {
		err := r.Register(context.Background(), tc.si)
		var ae *rebound.ArgumentError
		if !errors.As(err, &ae) {
			t.Errorf("%s: %v, want a *rebound.ArgumentError", tc.name, err)
			continue
		}
		t.Logf("%s: %v", tc.name, err)
	}
	if len(f.events) != 0 {
		t.Fatalf("bad input reached the registry: %v", f.events)
	}
	_ = r.Register(context.Background(), helloworld())
	if err := r.Register(context.Background(), helloworld()); !errors.Is(err, rebound.ErrInvalidArgument) {
		t.Errorf("second Register of one instance: %v", err)
	}
	for _, err := range []error{
		func() error { _, err := reboundkratos.NewRegistrar(0, f.register); return err }(),
		func() error { _, err := reboundkratos.NewRegistrar(reboundkratos.FormatNacos, nil); return err }(),
		func() error {
			_, err := reboundkratos.NewRegistrar(reboundkratos.FormatNacos, f.register, reboundkratos.WithDrainDelay(-1))
			return err
		}(),
		func() error {
			_, err := reboundkratos.NewRegistrar(reboundkratos.FormatNacos, f.register, reboundkratos.WithWeight(0))
			return err
		}(),
		func() error { // a Discovery option
			_, err := reboundkratos.NewRegistrar(reboundkratos.FormatNacos, f.register, reboundkratos.WithKind("http"))
			return err
		}(),
		func() error {
			_, err := reboundkratos.NewRegistrar(reboundkratos.FormatNacos, f.register, reboundkratos.WithWeight(math.Inf(1)))
			return err
		}(),
		func() error {
			_, err := reboundkratos.NewRegistrar(reboundkratos.FormatEtcd, f.register, reboundkratos.WithGroup("G"))
			return err
		}(),
	} {
		if !errors.Is(err, rebound.ErrInvalidArgument) {
			t.Errorf("NewRegistrar: %v, want ErrInvalidArgument", err)
		}
	}
}

// TestRegisterRetriesFirstRegistration: a first registration the registry
// rejects is tried again, with backoff, until ctx ends (kratos.App.Run's
// RegistrarTimeout); then Register returns the last error and nothing
// stays registered. A registry that accepts later is enough.
func TestRegisterRetriesFirstRegistration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var f fakeRegs
		fails := 0
		reg := func(ctx context.Context, key subscriber.Key, inst subscriber.Instance) (subscriber.Registration, error) {
			f.mu.Lock()
			if fails > 0 {
				fails--
				f.mu.Unlock()
				return nil, errors.New("Tps Flow restricted")
			}
			f.mu.Unlock()
			return f.register(ctx, key, inst)
		}
		r, _ := reboundkratos.NewRegistrar(reboundkratos.FormatNacos, reg, reboundkratos.WithDrainDelay(0),
			reboundkratos.WithPolicy(rebound.Policy{Initial: 100 * time.Millisecond, Max: time.Second}))
		fails = 3
		if err := r.Register(context.Background(), helloworld()); err != nil {
			t.Fatalf("Register after 3 rejections: %v", err)
		}
		if len(f.live) != 2 {
			t.Fatalf("registered %v", f.live)
		}
		_ = r.Deregister(context.Background(), helloworld())

		fails = 1 << 30
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err := r.Register(ctx, helloworld())
		var re *rebound.RetryError
		if !errors.As(err, &re) || re.Attempts < 5 || !strings.Contains(err.Error(), "Tps Flow restricted") {
			t.Fatalf("Register against a registry that always rejects: %v, want a RetryError after several attempts", err)
		}
		t.Logf("%v", err)
		if len(f.live) != 0 {
			t.Fatalf("left registered: %v", f.live)
		}
	})
}

// TestDeregisterFailureStillStops: a deregistration the registry refuses
// is logged, the Registration closed, the drain still waited, and nil
// returned: kratos.App.Stop does not stop the servers when Deregister
// fails.
func TestDeregisterFailureStillStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var f fakeRegs
		r, _ := reboundkratos.NewRegistrar(reboundkratos.FormatNacos, f.register, reboundkratos.WithDrainDelay(2*time.Second))
		if err := r.Register(context.Background(), helloworld()); err != nil {
			t.Fatal(err)
		}
		f.shutdownErr = errors.New("registry down")
		start := time.Now()
		if err := r.Deregister(context.Background(), helloworld()); err != nil {
			t.Fatalf("Deregister with a failing registry: %v, want nil", err)
		}
		if d := time.Since(start); d != 2*time.Second {
			t.Fatalf("Deregister took %v, want the 2 s drain", d)
		}
		if f.closed != 2 {
			t.Fatalf("%d Registrations closed, want 2", f.closed)
		}
	})
}
