package failback

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/cluster"
)

// claimStore is a memStore shared by several Invokers: Claim hands out
// each stored call once, Load is never called, Update can lose leases.
type claimStore struct {
	*memStore
	cmu      sync.Mutex
	claimed  map[uint64]bool
	lost     bool // Update reports ErrLeaseLost
	wake     chan struct{}
	loads    int
	released []uint64 // Release's calls
}

func newClaimStore() *claimStore {
	return &claimStore{memStore: newMemStore(), claimed: map[uint64]bool{}, wake: make(chan struct{}, 1)}
}

func (c *claimStore) Load(fn func(StoredCall) error) error {
	c.cmu.Lock()
	c.loads++
	c.cmu.Unlock()
	return c.memStore.Load(fn)
}

func (c *claimStore) Claim(_ context.Context, n int) ([]StoredCall, time.Duration, error) {
	c.cmu.Lock()
	defer c.cmu.Unlock()
	var out []StoredCall
	err := c.memStore.Load(func(sc StoredCall) error {
		if !c.claimed[sc.ID] && len(out) < n {
			c.claimed[sc.ID] = true
			sc.Due = time.Now()
			out = append(out, sc)
		}
		return nil
	})
	return out, 20 * time.Millisecond, err
}

func (c *claimStore) Notify() <-chan struct{} { return c.wake }

// Release records id; the call is not claimed again (no lease here).
func (c *claimStore) Release(id uint64) {
	c.cmu.Lock()
	c.released = append(c.released, id)
	c.cmu.Unlock()
}

func (c *claimStore) Update(id uint64, attempts int, due time.Time) error {
	c.cmu.Lock()
	lost := c.lost
	c.cmu.Unlock()
	if lost {
		return ErrLeaseLost
	}
	return c.memStore.Update(id, attempts, due)
}

// An Invoker on a Claimer claims the calls put in the store after New
// (never Load), runs them, and removes the delivered ones.
func TestClaimerDelivers(t *testing.T) { synctest.Test(t, testClaimerDelivers) }

func testClaimerDelivers(t *testing.T) {
	st := newClaimStore()
	p := newProvider("p", nil)
	f, err := New(cluster.NewStaticDirectory(p), WithStore(st, nil), WithPolicy(rebound.Policy{Initial: 10 * time.Millisecond}))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for range 5 {
		if _, err := st.Add(StoredCall{Method: "m", Args: []byte("[]"), Born: time.Now(), Due: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	st.wake <- struct{}{}
	synctest.Wait()
	if s := f.Stats(); s.Succeeded != 5 || s.Offered != 5 {
		t.Fatalf("stats %+v, want 5 offered and succeeded", s)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if len(st.calls) != 0 || st.loads != 0 {
		t.Errorf("%d calls left, %d loads: want none", len(st.calls), st.loads)
	}
}

// A call whose lease was lost is handed over: dropped with ErrClosed,
// left in the store, not retried.
func TestClaimerLeaseLost(t *testing.T) { synctest.Test(t, testClaimerLeaseLost) }

func testClaimerLeaseLost(t *testing.T) {
	st := newClaimStore()
	st.lost = true
	p := newProvider("p", func(context.Context, call) (any, error) { return nil, errRefused })
	f, err := New(cluster.NewStaticDirectory(p), WithStore(st, nil), WithPolicy(rebound.Policy{Initial: 10 * time.Millisecond}))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := st.Add(StoredCall{Method: "m", Args: []byte("[]"), Born: time.Now(), Due: time.Now()}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // the claim loop's next claim (20 ms) and the retry (10 ms): virtual time
	synctest.Wait()
	if s := f.Stats(); s.Dropped[ErrClosed] != 1 {
		t.Fatalf("stats %+v, want 1 ErrClosed", s)
	}
	p.mu.Lock()
	n := len(p.calls)
	p.mu.Unlock()
	st.mu.Lock()
	left := len(st.calls)
	st.mu.Unlock()
	if n != 1 || left != 1 {
		t.Errorf("%d attempts, %d calls stored: want 1 and 1", n, left)
	}
}

// quarantineFails is a claimStore whose Quarantine fails.
type quarantineFails struct{ *claimStore }

func (quarantineFails) Quarantine(uint64, error) error { return errRefused }

// A claimed call whose arguments the Codec cannot decode is never run:
// without WithQuarantine it is logged at Error and released (its lease
// is no longer renewed, so it is claimed again when the lease ends);
// with WithQuarantine it is set aside, or released if that fails. The
// other calls of the claim run.
func TestClaimedUndecodable(t *testing.T) {
	for _, c := range []struct {
		name               string
		quarantine, qfails bool
		released, setAside int
	}{
		{name: "no quarantine", released: 1},
		{name: "quarantine", quarantine: true, setAside: 1},
		{name: "quarantine fails", quarantine: true, qfails: true, released: 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cs := newClaimStore()
				var st Claimer = cs
				if c.qfails {
					st = quarantineFails{cs}
				}
				core, logs := observer.New(zapcore.ErrorLevel)
				opts := []Option{WithStore(st, nil), WithPolicy(rebound.Policy{Initial: 10 * time.Millisecond}), WithLogger(zap.New(core))}
				if c.quarantine {
					opts = append(opts, WithQuarantine())
				}
				p := newProvider("p", nil)
				f := mustNew(t, cluster.NewStaticDirectory(p), opts...)
				defer f.Close()
				bad, _ := cs.Add(StoredCall{Method: "m", Args: []byte("not json"), Born: time.Now(), Due: time.Now()})
				if _, err := cs.Add(StoredCall{Method: "m", Args: []byte("[]"), Born: time.Now(), Due: time.Now()}); err != nil {
					t.Fatal(err)
				}
				cs.wake <- struct{}{}
				synctest.Wait()
				if s := f.Stats(); s.Offered != 1 || s.Succeeded != 1 || s.Quarantined != uint64(c.setAside) {
					t.Errorf("stats %+v, want 1 offered and succeeded, %d quarantined", s, c.setAside)
				}
				cs.cmu.Lock()
				released := append([]uint64(nil), cs.released...)
				cs.cmu.Unlock()
				if len(released) != c.released || c.released == 1 && released[0] != bad {
					t.Errorf("released %v, want call %d released %d times", released, bad, c.released)
				}
				calls, _ := cs.snapshot()
				if _, kept := calls[bad]; kept == (c.setAside == 1) {
					t.Errorf("call %d in the store: %v; want it kept unless quarantined", bad, kept)
				}
				if n := logs.FilterField(zap.Uint64("id", bad)).Len(); n != 1 {
					t.Errorf("%d Error lines about call %d, want 1: %v", n, bad, logs.All())
				}
			})
		})
	}
}

// releasePanics is a claimStore whose Release panics.
type releasePanics struct{ *claimStore }

func (releasePanics) Release(uint64) { panic("release broke") }

// A Release that panics is logged at Error; the claim loop goes on and
// runs the claim's other calls, and later claims.
func TestClaimReleasePanics(t *testing.T) { synctest.Test(t, testClaimReleasePanics) }

func testClaimReleasePanics(t *testing.T) {
	cs := newClaimStore()
	core, logs := observer.New(zapcore.ErrorLevel)
	p := newProvider("p", nil)
	f := mustNew(t, cluster.NewStaticDirectory(p), WithStore(releasePanics{cs}, nil),
		WithPolicy(rebound.Policy{Initial: 10 * time.Millisecond}), WithLogger(zap.New(core)))
	defer f.Close()
	for _, args := range []string{"not json", "[]"} {
		if _, err := cs.Add(StoredCall{Method: "m", Args: []byte(args), Born: time.Now(), Due: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	cs.wake <- struct{}{}
	synctest.Wait()
	if _, err := cs.Add(StoredCall{Method: "m", Args: []byte("[]"), Born: time.Now(), Due: time.Now()}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // the next claim (20 ms): virtual time
	synctest.Wait()
	if s := f.Stats(); s.Succeeded != 2 {
		t.Errorf("stats %+v, want 2 succeeded", s)
	}
	if n := logs.FilterMessageSnippet("releasing a claimed call failed").Len(); n != 1 {
		t.Errorf("%d Error lines for the panic, want 1: %v", n, logs.All())
	}
}
