package failback

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/cluster"
)

var errClaimBroke = errors.New("claim: the connection broke after the rows were read")

// erringClaimer is a claimStore whose Claim also returns err (and next):
// a Store that leased calls and then failed, for instance on its
// connection.
type erringClaimer struct {
	*claimStore
	mu     sync.Mutex
	err    error
	next   time.Duration
	claims int
}

func (e *erringClaimer) Claim(ctx context.Context, n int) ([]StoredCall, time.Duration, error) {
	calls, _, _ := e.claimStore.Claim(ctx, n)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.claims++
	if e.claims > 1000 { // a loop that spins: stop it, the test fails on the count
		return calls, time.Hour, e.err
	}
	return calls, e.next, e.err
}

// A Claim that returns calls and an error has leased those calls (the
// Store holds and renews them): the Invoker runs them, else nobody does
// until the Store closes.
func TestClaimCallsWithError(t *testing.T) { synctest.Test(t, testClaimCallsWithError) }

func testClaimCallsWithError(t *testing.T) {
	st := &erringClaimer{claimStore: newClaimStore(), err: errClaimBroke, next: 20 * time.Millisecond}
	p := newProvider("p", nil)
	f, err := New(cluster.NewStaticDirectory(p), WithStore(st, nil), WithPolicy(rebound.Policy{Initial: 10 * time.Millisecond}))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for range 3 {
		if _, err := st.Add(StoredCall{Method: "m", Args: []byte("[]"), Born: time.Now(), Due: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(time.Second) // several claims: virtual time
	synctest.Wait()
	if s := f.Stats(); s.Offered != 3 || s.Succeeded != 3 {
		t.Fatalf("stats %+v: want the 3 calls of the failed Claim offered and delivered", s)
	}
	st.memStore.mu.Lock()
	defer st.memStore.mu.Unlock()
	if len(st.memStore.calls) != 0 {
		t.Errorf("%d calls left in the store, want 0", len(st.memStore.calls))
	}
}

// A Claim that brings no call and names no wait (next 0, or negative),
// failing or not, does not make the claim loop spin: it waits before it
// asks again.
func TestClaimErrorNoWait(t *testing.T) { synctest.Test(t, testClaimErrorNoWait) }

func testClaimErrorNoWait(t *testing.T) {
	for _, c := range []struct {
		err  error
		next time.Duration
	}{{errClaimBroke, 0}, {errClaimBroke, -time.Second}, {nil, 0}} {
		st := &erringClaimer{claimStore: newClaimStore(), err: c.err, next: c.next}
		f, err := New(cluster.NewStaticDirectory(newProvider("p", nil)), WithStore(st, nil))
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		f.Close()
		st.mu.Lock()
		n := st.claims
		st.mu.Unlock()
		if n > 20 {
			t.Errorf("err %v, next %v: %d claims in 1 s of a Store with nothing to give: the loop spins", c.err, c.next, n)
		}
	}
}

// blockingClaimer's Claim waits for its context (the Invoker's, which
// Close cancels), then returns every stored call with the context's error.
type blockingClaimer struct {
	*claimStore
	entered chan struct{}
}

func (b *blockingClaimer) Claim(ctx context.Context, n int) ([]StoredCall, time.Duration, error) {
	close(b.entered)
	<-ctx.Done()
	calls, _, _ := b.claimStore.Claim(ctx, n)
	return calls, time.Second, ctx.Err()
}

// Close during a Claim: the calls it returns after Close are neither run
// nor removed (the Store keeps them for whoever claims next), and Close
// returns.
func TestClaimReturnsAfterClose(t *testing.T) { synctest.Test(t, testClaimReturnsAfterClose) }

func testClaimReturnsAfterClose(t *testing.T) {
	st := &blockingClaimer{claimStore: newClaimStore(), entered: make(chan struct{})}
	if _, err := st.Add(StoredCall{Method: "m", Args: []byte("[]"), Born: time.Now(), Due: time.Now()}); err != nil {
		t.Fatal(err)
	}
	p := newProvider("p", nil)
	f, err := New(cluster.NewStaticDirectory(p), WithStore(st, nil))
	if err != nil {
		t.Fatal(err)
	}
	<-st.entered
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	synctest.Wait()
	if s := f.Stats(); s.Offered != 0 || len(p.snapshot()) != 0 {
		t.Errorf("stats %+v, %d attempts: want nothing offered nor run after Close", s, len(p.snapshot()))
	}
	st.memStore.mu.Lock()
	defer st.memStore.mu.Unlock()
	if len(st.memStore.calls) != 1 {
		t.Errorf("%d calls stored, want the 1 (kept for the next claim)", len(st.memStore.calls))
	}
}

// closedNotifier is a claimStore whose Notify channel is closed (a Store
// that closes it when it stops, say); past 1000 claims, Claim blocks until
// the Invoker's Close so that a spinning loop ends.
type closedNotifier struct {
	*claimStore
	mu     sync.Mutex
	claims int
}

func (c *closedNotifier) Claim(ctx context.Context, n int) ([]StoredCall, time.Duration, error) {
	c.mu.Lock()
	c.claims++
	spun := c.claims > 1000
	c.mu.Unlock()
	if spun {
		<-ctx.Done()
		return nil, time.Hour, ctx.Err()
	}
	return c.claimStore.Claim(ctx, n)
}

// A closed Notify channel is no signal: the claim loop claims when the
// last claim said, not in a loop.
func TestClaimNotifyClosed(t *testing.T) { synctest.Test(t, testClaimNotifyClosed) }

func testClaimNotifyClosed(t *testing.T) {
	st := &closedNotifier{claimStore: newClaimStore()}
	close(st.wake)
	f, err := New(cluster.NewStaticDirectory(newProvider("p", nil)), WithStore(st, nil))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // claims every 20 ms: virtual time
	synctest.Wait()
	f.Close()
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.claims > 60 {
		t.Errorf("%d claims in 1 s with Notify closed and a next of 20 ms: the loop spins", st.claims)
	}
}
