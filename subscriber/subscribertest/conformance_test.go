package subscribertest_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/subscribertest"
)

// TestConformanceInMemory runs the conformance suite against the
// in-memory Registry of this package: the suite must pass on a correct
// implementation (the suite's own test), and so documents what the
// in-memory Registry guarantees.
func TestConformanceInMemory(t *testing.T) {
	subscribertest.Run(t, memHarness(subscribertest.New()))
}

// TestConformanceInMemoryRedo runs the suite against the in-memory
// Registry modelling a client redo and an adapter that confirms from
// evidence (EnableRedo): ConfirmsReconnects is true, so the ConfirmsReconnects case runs.
func TestConformanceInMemoryRedo(t *testing.T) {
	reg := subscribertest.New()
	reg.EnableRedo(nil)
	h := memHarness(reg)
	h.NewRegistry = func(t *testing.T) (subscriber.Registry, func()) {
		v := &redoView{view{reg: reg}}
		return v, func() { v.closed.Store(true) }
	}
	subscribertest.Run(t, h)
}

// redoView is a view whose ConfirmsReconnects is the Registry's.
type redoView struct{ view }

func (v *redoView) ConfirmsReconnects() bool { return v.reg.ConfirmsReconnects() }

// memHarness adapts a shared in-memory Registry: every "client" is a view
// of it that can be closed on its own; providers are modelled with Set.
func memHarness(reg *subscribertest.Registry) subscribertest.Harness {
	var (
		mu        sync.Mutex
		instances = map[string][]subscriber.Instance{} // by the Key (no clusters) String
		clusters  = map[string]map[string]bool{}       // cluster names seen, by Key String
	)
	publish := func(k subscriber.Key) {
		ks := k.String()
		list := instances[ks]
		reg.Set(k, list...)
		for c := range clusters[ks] {
			kc := k
			kc.Clusters = []string{c}
			var in []subscriber.Instance
			for _, i := range list {
				if i.Cluster == c {
					in = append(in, i)
				}
			}
			reg.Set(kc, in...)
		}
	}
	return subscribertest.Harness{
		NewRegistry: func(t *testing.T) (subscriber.Registry, func()) {
			v := &view{reg: reg}
			return v, func() { v.closed.Store(true) }
		},
		Register: func(t *testing.T, k subscriber.Key, inst subscriber.Instance) {
			mu.Lock()
			defer mu.Unlock()
			ks := k.String()
			list := slices.DeleteFunc(instances[ks], func(i subscriber.Instance) bool {
				return i.IP == inst.IP && i.Port == inst.Port
			})
			instances[ks] = append(list, inst)
			if clusters[ks] == nil {
				clusters[ks] = map[string]bool{}
			}
			if inst.Cluster != "" {
				clusters[ks][inst.Cluster] = true
			}
			publish(k)
		},
		Deregister: func(t *testing.T, k subscriber.Key, inst subscriber.Instance) {
			mu.Lock()
			defer mu.Unlock()
			ks := k.String()
			instances[ks] = slices.DeleteFunc(instances[ks], func(i subscriber.Instance) bool {
				return i.IP == inst.IP && i.Port == inst.Port
			})
			publish(k)
		},
		Stop:  func(t *testing.T) { reg.SetDown(true) },
		Start: func(t *testing.T) { reg.SetDown(false) },
	}
}

// errViewClosed is a closed view's error: a closed client's.
var errViewClosed = fmt.Errorf("view: closed: %w", rebound.ErrClosed)

// view is one client of the shared Registry, closable on its own.
type view struct {
	reg    *subscribertest.Registry
	closed atomic.Bool
}

func (v *view) Subscribe(ctx context.Context, k subscriber.Key, s subscriber.Sink) error {
	if v.closed.Load() {
		return errViewClosed
	}
	return v.reg.Subscribe(ctx, k, s)
}

func (v *view) Unsubscribe(ctx context.Context, k subscriber.Key, s subscriber.Sink) error {
	return v.reg.Unsubscribe(ctx, k, s)
}

func (v *view) MonitorConnection(ctx context.Context, report func(connected bool)) error {
	return v.reg.MonitorConnection(ctx, report)
}

// ConfirmsReconnects: a plain view leaves the confirmations to the Manager.
func (v *view) ConfirmsReconnects() bool { return false }

// The suite must fail on broken implementations. Each case runs
// TestConformanceBroken in a child process (a failing subtest cannot be
// contained in this one) and checks that it fails where it should.
func TestConformanceDetectsBrokenRegistries(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the test binary again")
	}
	for _, tc := range []struct {
		broken  string
		subtest string // the subtest that must fail
	}{
		// Each Subscribe adds a delivery, as nacos-sdk-go does with a
		// naive retry: every change is pushed twice after a restart.
		{"duplicate", "ExactlyOnce"},
		// A restart loses the subscriptions and nobody tells the
		// Manager: changes after the restart never arrive.
		{"forget", "Restart"},
		// An adapter confirming reconnects that answers for nothing after a restart.
		{"silent-redo", "ConfirmsReconnects"},
	} {
		t.Run(tc.broken, func(t *testing.T) {
			want := "--- FAIL: TestConformanceBroken/" + tc.subtest
			cmd := exec.Command(os.Args[0], "-test.run=^TestConformanceBroken$/^"+tc.subtest+"$", "-test.v")
			cmd.Env = append(os.Environ(), brokenEnv+"="+tc.broken)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("the suite passed a %s registry:\n%s", tc.broken, out)
			}
			if !strings.Contains(string(out), want) {
				t.Fatalf("the suite failed on a %s registry, but not with %q:\n%s", tc.broken, want, out)
			}
		})
	}
}

const brokenEnv = "SUBSCRIBERTEST_BROKEN"

// TestConformanceBroken runs the suite on a broken registry when asked to
// by TestConformanceDetectsBrokenRegistries; otherwise it is skipped.
func TestConformanceBroken(t *testing.T) {
	broken := os.Getenv(brokenEnv)
	if broken == "" {
		t.Skip("run by TestConformanceDetectsBrokenRegistries")
	}
	reg := subscribertest.New()
	h := memHarness(reg)
	h.Timeout = 2 * time.Second // the in-memory registry is instant: fail fast
	switch broken {
	case "duplicate":
		h.NewRegistry = func(t *testing.T) (subscriber.Registry, func()) {
			d := &dupView{view: view{reg: reg}, extra: map[subscriber.Sink][]subscriber.Sink{}}
			return d, func() { d.closed.Store(true) }
		}
	case "silent-redo":
		// An adapter confirming reconnects whose redo is lost and which never says so.
		reg.EnableRedo(func(subscriber.Key) subscribertest.RedoOutcome { return subscribertest.RedoSilent })
		h.NewRegistry = func(t *testing.T) (subscriber.Registry, func()) {
			v := &redoView{view{reg: reg}}
			return v, func() { v.closed.Store(true) }
		}
	case "forget":
		// A restart that loses every subscription without a connection
		// event.
		h.Stop = func(t *testing.T) {}
		h.Start = func(t *testing.T) { reg.Forget() }
	}
	subscribertest.Run(t, h)
}

// dupView registers one more delivery per Subscribe call.
type dupView struct {
	view
	mu    sync.Mutex
	extra map[subscriber.Sink][]subscriber.Sink
}

type forward struct{ subscriber.Sink }

func (d *dupView) Subscribe(ctx context.Context, k subscriber.Key, s subscriber.Sink) error {
	f := &forward{s}
	d.mu.Lock()
	d.extra[s] = append(d.extra[s], f)
	d.mu.Unlock()
	return d.view.Subscribe(ctx, k, f)
}

func (d *dupView) Unsubscribe(ctx context.Context, k subscriber.Key, s subscriber.Sink) error {
	d.mu.Lock()
	fs := d.extra[s]
	delete(d.extra, s)
	d.mu.Unlock()
	for _, f := range fs {
		_ = d.view.Unsubscribe(ctx, k, f)
	}
	return nil
}

func (d *dupView) MonitorConnection(ctx context.Context, report func(connected bool)) error {
	return d.view.MonitorConnection(ctx, report)
}
