package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/subscriber"
)

// closingInvoker records whether (and how often) it was closed, and whether
// the directory's lock was held at that moment.
type closingInvoker struct {
	target   string
	dir      *RegistryDirectory
	closes   atomic.Int32
	closeErr error
	locked   atomic.Bool // the directory's lock was held during Close
}

func (c *closingInvoker) Target() string { return c.target }
func (c *closingInvoker) Invoke(context.Context, *Invocation) (any, error) {
	return nil, nil
}
func (c *closingInvoker) Close() error {
	c.closes.Add(1)
	if c.dir != nil {
		if c.dir.mu.TryLock() {
			c.dir.mu.Unlock()
		} else {
			c.locked.Store(true)
		}
	}
	return c.closeErr
}

// dialer builds closingInvokers and remembers them all.
type dialer struct {
	mu      sync.Mutex
	dir     *RegistryDirectory
	dialled []*closingInvoker
	fail    map[string]error // by IP
	locked  bool             // the directory's lock was held during a dial
}

func (d *dialer) dial(in subscriber.Instance) (Invoker, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.dir != nil {
		if d.dir.mu.TryLock() {
			d.dir.mu.Unlock()
		} else {
			d.locked = true
		}
	}
	if err := d.fail[in.IP]; err != nil {
		return nil, err
	}
	iv := &closingInvoker{target: hostPort(in), dir: d.dir}
	d.dialled = append(d.dialled, iv)
	return iv, nil
}

func (d *dialer) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.dialled)
}

func inst(ip string, port uint64) subscriber.Instance {
	return subscriber.Instance{IP: ip, Port: port, Weight: 1, Healthy: true, Enabled: true}
}

func newDir(t *testing.T, opts ...Option) (*RegistryDirectory, *dialer) {
	t.Helper()
	dl := &dialer{fail: map[string]error{}}
	d, err := NewRegistryDirectory(dl.dial, opts...)
	if err != nil {
		t.Fatal(err)
	}
	dl.dir = d
	t.Cleanup(func() { _ = d.Close() })
	return d, dl
}

func list(t *testing.T, d Directory) []string {
	t.Helper()
	ivs, err := d.List(context.Background(), nil)
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	return targets(ivs)
}

func TestRegistryDirectoryIsListener(t *testing.T) {
	d, _ := newDir(t)
	var l func([]subscriber.Instance) = d.Update // compile-time: Update is a listener
	l([]subscriber.Instance{inst("10.0.0.1", 80)})
	if got := list(t, d); fmt.Sprint(got) != "[10.0.0.1:80]" {
		t.Fatalf("List = %v", got)
	}
}

func TestNewRegistryDirectoryNilDial(t *testing.T) {
	d, err := NewRegistryDirectory(nil)
	var ae *rebound.ArgumentError
	if d != nil || !errors.Is(err, rebound.ErrInvalidArgument) || !errors.As(err, &ae) || ae.Func != "cluster.NewRegistryDirectory" || ae.Arg != "dial" {
		t.Fatalf("NewRegistryDirectory(nil) = %v, %v; want a *rebound.ArgumentError naming dial", d, err)
	}
	if want := "dial must not be nil"; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not name the argument (%q)", err, want)
	}
}

func TestRegistryDirectoryEmpty(t *testing.T) {
	d, _ := newDir(t)
	ivs, err := d.List(context.Background(), nil)
	if !errors.Is(err, ErrNoInvokers) || ivs != nil {
		t.Fatalf("List before any update = %v, %v; want ErrNoInvokers", ivs, err)
	}
	// An empty push to an empty directory leaves it empty, without panic.
	d.Update(nil)
	if _, err := d.List(context.Background(), nil); !errors.Is(err, ErrNoInvokers) {
		t.Fatalf("List after empty push = %v; want ErrNoInvokers", err)
	}
}

func TestRegistryDirectoryUpdateReuseClose(t *testing.T) {
	d, dl := newDir(t)
	a, b, c := inst("10.0.0.1", 80), inst("10.0.0.2", 80), inst("10.0.0.3", 80)

	d.Update([]subscriber.Instance{a, b})
	if got := list(t, d); fmt.Sprint(got) != "[10.0.0.1:80 10.0.0.2:80]" {
		t.Fatalf("List = %v", got)
	}
	if dl.count() != 2 {
		t.Fatalf("dialled %d, want 2", dl.count())
	}
	ivA, ivB := dl.dialled[0], dl.dialled[1]

	// b unchanged (reused), a gone (closed), c new (dialled).
	d.Update([]subscriber.Instance{b, c})
	if got := list(t, d); fmt.Sprint(got) != "[10.0.0.2:80 10.0.0.3:80]" {
		t.Fatalf("List = %v", got)
	}
	if dl.count() != 3 {
		t.Fatalf("dialled %d in all, want 3 (b reused)", dl.count())
	}
	if ivA.closes.Load() != 1 || ivB.closes.Load() != 0 {
		t.Fatalf("closes: a=%d (want 1), b=%d (want 0)", ivA.closes.Load(), ivB.closes.Load())
	}
	cur, _ := d.List(context.Background(), nil)
	if cur[0] != Invoker(ivB) {
		t.Fatal("unchanged instance b got a new invoker")
	}

	// A changed instance (metadata) is dialled anew and its old invoker closed.
	b2 := b
	b2.Metadata = map[string]string{"version": "2"}
	d.Update([]subscriber.Instance{b2, c})
	if dl.count() != 4 || ivB.closes.Load() != 1 {
		t.Fatalf("after b changed: dialled %d (want 4), b closes %d (want 1)", dl.count(), ivB.closes.Load())
	}
	// The directory copied the metadata: changing the caller's map is not a change.
	b2.Metadata["version"] = "3"
	d.Update([]subscriber.Instance{{IP: b.IP, Port: b.Port, Weight: 1, Healthy: true, Enabled: true,
		Metadata: map[string]string{"version": "2"}}, c})
	if dl.count() != 4 {
		t.Fatalf("equal push re-dialled: %d dials", dl.count())
	}

	for _, iv := range dl.dialled {
		if iv.locked.Load() {
			t.Errorf("%s was closed with the directory's lock held", iv.target)
		}
	}
	if dl.locked {
		t.Error("dial was called with the directory's lock held")
	}

	// Close closes everything still listed, once; List then fails.
	if err := d.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for _, iv := range dl.dialled {
		if iv.closes.Load() != 1 {
			t.Errorf("%s closed %d times, want 1", iv.target, iv.closes.Load())
		}
	}
	if _, err := d.List(context.Background(), nil); !errors.Is(err, errClosed) || errors.Is(err, ErrNoInvokers) {
		t.Fatalf("List after Close = %v; want ErrClosed (not ErrNoInvokers)", err)
	}
	d.Update([]subscriber.Instance{a})
	if dl.count() != 4 {
		t.Error("Update after Close dialled")
	}
	if err := d.Close(); err != nil {
		t.Errorf("second Close = %v, want nil", err)
	}
}

func TestRegistryDirectoryKeepOnEmpty(t *testing.T) {
	d, dl := newDir(t)
	a, b := inst("10.0.0.1", 80), inst("10.0.0.2", 80)
	d.Update([]subscriber.Instance{a, b})

	down := a
	down.Healthy = false
	for name, push := range map[string][]subscriber.Instance{
		"empty push":     nil,
		"all filtered":   {down},
		"all dials fail": {inst("10.9.9.9", 80)},
	} {
		dl.fail["10.9.9.9"] = errors.New("connection refused")
		d.Update(push)
		if got := list(t, d); fmt.Sprint(got) != "[10.0.0.1:80 10.0.0.2:80]" {
			t.Errorf("%s: List = %v; want the last known good list", name, got)
		}
	}
	for _, iv := range dl.dialled {
		if iv.closes.Load() != 0 {
			t.Errorf("%s closed although the list was kept", iv.target)
		}
	}
	// A later good push still applies.
	d.Update([]subscriber.Instance{b})
	if got := list(t, d); fmt.Sprint(got) != "[10.0.0.2:80]" {
		t.Errorf("List after good push = %v", got)
	}
}

func TestRegistryDirectoryDialFailure(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	var mu sync.Mutex
	var reported []error
	d, dl := newDir(t, WithLogger(zap.New(core)), WithErrorHandler(func(err error) {
		mu.Lock()
		reported = append(reported, err)
		mu.Unlock()
	}))
	a, b := inst("10.0.0.1", 80), inst("10.0.0.2", 80)
	refused := errors.New("connection refused")
	dl.fail["10.0.0.2"] = refused
	d.Update([]subscriber.Instance{a, b})
	if got := list(t, d); fmt.Sprint(got) != "[10.0.0.1:80]" {
		t.Fatalf("List = %v; want the dialable instance only", got)
	}
	if len(reported) != 1 {
		t.Fatalf("reported %v, want one DialError", reported)
	}
	var de *DialError
	if !errors.As(reported[0], &de) || de.Instance.IP != "10.0.0.2" || !errors.Is(reported[0], refused) {
		t.Fatalf("reported %v; want a *DialError for 10.0.0.2 wrapping the dial error", reported[0])
	}
	if n := logs.FilterLevelExact(zapcore.WarnLevel).FilterMessageSnippet("dial failed").Len(); n != 1 {
		t.Errorf("%d dial-failure Warn lines, want 1: %v", n, logs.All())
	}

	// A changed instance that fails to dial keeps its previous invoker.
	a2 := a
	a2.Weight = 5
	dl.fail["10.0.0.1"] = refused
	d.Update([]subscriber.Instance{a2})
	ivs, _ := d.List(context.Background(), nil)
	if len(ivs) != 1 || ivs[0] != Invoker(dl.dialled[0]) || dl.dialled[0].closes.Load() != 0 {
		t.Fatalf("changed instance with failing dial: list %v, closes %d; want the previous invoker kept",
			targets(ivs), dl.dialled[0].closes.Load())
	}
	// Once it dials, it is replaced and the old one closed.
	delete(dl.fail, "10.0.0.1")
	d.Update([]subscriber.Instance{a2})
	ivs, _ = d.List(context.Background(), nil)
	if ivs[0] == Invoker(dl.dialled[0]) || dl.dialled[0].closes.Load() != 1 {
		t.Fatal("changed instance not replaced after a successful dial")
	}

	// A dial returning (nil, nil) is a dial error, not a nil invoker in the list.
	d2, err := NewRegistryDirectory(func(subscriber.Instance) (Invoker, error) { return nil, nil })
	if err != nil {
		t.Fatal(err)
	}
	d2.Update([]subscriber.Instance{a})
	if _, err := d2.List(context.Background(), nil); !errors.Is(err, ErrNoInvokers) {
		t.Errorf("List with nil dial result = %v; want ErrNoInvokers", err)
	}
	_ = d2.Close()
}

func TestRegistryDirectoryFilterAndIdentity(t *testing.T) {
	d, dl := newDir(t)
	disabled := inst("10.0.0.3", 80)
	disabled.Enabled = false
	unhealthy := inst("10.0.0.4", 80)
	unhealthy.Healthy = false
	withID := inst("10.0.0.5", 80)
	withID.ID = "node-5"
	moved := withID // same ID, new address: a change of the same instance
	moved.IP = "10.0.0.6"
	d.Update([]subscriber.Instance{inst("10.0.0.1", 80), inst("10.0.0.1", 80), disabled, unhealthy, withID})
	if got := list(t, d); fmt.Sprint(got) != "[10.0.0.1:80 10.0.0.5:80]" {
		t.Fatalf("List = %v; want duplicates, disabled and unhealthy left out", got)
	}
	d.Update([]subscriber.Instance{inst("10.0.0.1", 80), moved})
	if got := list(t, d); fmt.Sprint(got) != "[10.0.0.1:80 10.0.0.6:80]" || dl.dialled[1].closes.Load() != 1 {
		t.Fatalf("List = %v; want node-5 re-dialled at its new address and the old invoker closed", got)
	}

	all, _ := newDir(t, WithFilter(nil))
	all.Update([]subscriber.Instance{disabled, unhealthy})
	if got := list(t, all); len(got) != 2 {
		t.Errorf("WithFilter(nil): List = %v; want every instance", got)
	}
}

func TestRegistryDirectoryCloseErrors(t *testing.T) {
	boom := errors.New("boom")
	d, err := NewRegistryDirectory(func(in subscriber.Instance) (Invoker, error) {
		return &closingInvoker{target: hostPort(in), closeErr: boom}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	d.Update([]subscriber.Instance{inst("10.0.0.1", 80), inst("10.0.0.2", 80)})
	err = d.Close()
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "10.0.0.1:80") || !strings.Contains(err.Error(), "10.0.0.2:80") {
		t.Fatalf("Close = %v; want both close errors, naming the targets", err)
	}
}

// TestRegistryDirectoryConcurrentUpdates runs updates from several
// goroutines (the Manager never does, but a user might) and checks that
// nothing leaks: every invoker ever dialled is either listed now (and open)
// or closed, exactly once.
func TestRegistryDirectoryConcurrentUpdates(t *testing.T) {
	d, dl := newDir(t)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 200 {
				var push []subscriber.Instance
				for k := range (g + i) % 5 {
					push = append(push, inst("10.0.0."+strconv.Itoa(k+1), uint64(80+(i%2))))
				}
				d.Update(push)
				_, _ = d.List(context.Background(), nil)
			}
		})
	}
	wg.Wait()
	ivs, err := d.List(context.Background(), nil)
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	for _, iv := range dl.dialled {
		listed := slices.Contains(ivs, Invoker(iv))
		switch c := iv.closes.Load(); {
		case listed && c != 0:
			t.Fatalf("%s is listed but was closed %d times", iv.target, c)
		case !listed && c != 1:
			t.Fatalf("%s is not listed and was closed %d times, want 1", iv.target, c)
		}
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	for _, iv := range dl.dialled {
		if iv.closes.Load() != 1 {
			t.Fatalf("after Close, %s closed %d times", iv.target, iv.closes.Load())
		}
	}
}

func BenchmarkRegistryDirectoryList(b *testing.B) {
	d, err := NewRegistryDirectory(func(in subscriber.Instance) (Invoker, error) {
		return &fakeInvoker{target: hostPort(in)}, nil
	})
	if err != nil {
		b.Fatal(err)
	}
	d.Update([]subscriber.Instance{inst("10.0.0.1", 80), inst("10.0.0.2", 80)})
	b.ReportAllocs()
	for b.Loop() {
		_, _ = d.List(context.Background(), nil)
	}
}

// gatedDialer blocks each dial of an IP until its gate is closed, and says
// when a dial has started.
type gatedDialer struct {
	dialer
	gates   map[string]chan struct{}
	started chan string
}

func (g *gatedDialer) dial(in subscriber.Instance) (Invoker, error) {
	g.started <- in.IP
	<-g.gates[in.IP]
	return g.dialer.dial(in)
}

func newGated(t *testing.T, ips ...string) (*RegistryDirectory, *gatedDialer) {
	g := &gatedDialer{gates: map[string]chan struct{}{}, started: make(chan string, 16)}
	for _, ip := range ips {
		g.gates[ip] = make(chan struct{})
	}
	d, err := NewRegistryDirectory(g.dial)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d, g
}

// An update that finishes dialling after a later update was applied is
// discarded, and what it dialled is closed.
func TestRegistryDirectoryStaleUpdateDiscarded(t *testing.T) {
	d, g := newGated(t, "10.0.0.1", "10.0.0.2")
	close(g.gates["10.0.0.2"])
	var wg sync.WaitGroup
	wg.Go(func() { d.Update([]subscriber.Instance{inst("10.0.0.1", 80)}) }) // older, slow
	<-g.started
	d.Update([]subscriber.Instance{inst("10.0.0.2", 80)}) // newer, applied first
	<-g.started
	close(g.gates["10.0.0.1"])
	wg.Wait()
	if got := list(t, d); fmt.Sprint(got) != "[10.0.0.2:80]" {
		t.Fatalf("List = %v; the older update overwrote the newer one", got)
	}
	for _, iv := range g.dialled {
		if want := int32(0); iv.target == "10.0.0.1:80" {
			want = 1
			if iv.closes.Load() != want {
				t.Errorf("discarded invoker %s closed %d times, want 1", iv.target, iv.closes.Load())
			}
		}
	}
}

// An update that finishes dialling after an older update was applied starts
// over from the list that update left, and wins.
func TestRegistryDirectoryUpdateRestartsAfterOlderApplied(t *testing.T) {
	d, g := newGated(t, "10.0.0.1", "10.0.0.2")
	var first, second sync.WaitGroup
	first.Go(func() { d.Update([]subscriber.Instance{inst("10.0.0.1", 80)}) }) // seq 1
	<-g.started
	second.Go(func() { d.Update([]subscriber.Instance{inst("10.0.0.2", 80)}) }) // seq 2
	<-g.started
	close(g.gates["10.0.0.1"]) // seq 1 applies while seq 2 is dialling
	first.Wait()
	if got := list(t, d); fmt.Sprint(got) != "[10.0.0.1:80]" {
		t.Fatalf("List = %v; want seq 1 applied", got)
	}
	close(g.gates["10.0.0.2"])
	second.Wait()
	if got := list(t, d); fmt.Sprint(got) != "[10.0.0.2:80]" {
		t.Fatalf("List = %v; want the newer update", got)
	}
	var open, closed int
	for _, iv := range g.dialled {
		switch iv.closes.Load() {
		case 0:
			open++
		case 1:
			closed++
		default:
			t.Errorf("%s closed %d times", iv.target, iv.closes.Load())
		}
	}
	// 10.0.0.1 (removed) and the first 10.0.0.2 (discarded) are closed; the
	// re-dialled 10.0.0.2 is listed.
	if len(g.dialled) != 3 || open != 1 || closed != 2 {
		t.Fatalf("dialled %d, open %d, closed %d; want 3, 1, 2", len(g.dialled), open, closed)
	}
}
