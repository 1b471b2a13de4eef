package failback

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/cluster"
)

// claimStore is a memStore shared by several Invokers: Claim hands out
// each stored call once, Load is never called, Update can lose leases.
type claimStore struct {
	*memStore
	cmu     sync.Mutex
	claimed map[uint64]bool
	lost    bool // Update reports ErrLeaseLost
	wake    chan struct{}
	loads   int
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
