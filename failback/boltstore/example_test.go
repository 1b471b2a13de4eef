package boltstore_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/cluster"
	"github.com/rebound-go/rebound/failback"
	"github.com/rebound-go/rebound/failback/boltstore"
)

// notifier is a provider that is down until up is called, and remembers
// the idempotency keys it served.
type notifier struct {
	mu     sync.Mutex
	isUp   bool
	served map[string]int
	first  string // what the first delivery printed, once done is closed
	done   chan struct{}
}

func (n *notifier) Target() string { return "10.0.0.7:20880" }

func (n *notifier) Invoke(_ context.Context, inv *cluster.Invocation) (any, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.isUp {
		return nil, syscall.ECONNREFUSED
	}
	key := inv.Attachments[failback.IdempotencyKey]
	if n.served[key]++; n.served[key] == 1 {
		n.first = fmt.Sprintf("delivered %v (key %s)", inv.Args, key) // printed by the example, in order
		close(n.done)
	}
	return nil, nil
}

// A call queued while the provider is down stays on disk across a
// restart: the second invoker loads it and delivers it, with the same
// idempotency key.
func Example_restart() {
	dir, err := os.MkdirTemp("", "failback-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "failback.db")
	p := &notifier{served: map[string]int{}, done: make(chan struct{})}
	policy := rebound.Policy{Initial: 10 * time.Millisecond, Max: 50 * time.Millisecond}

	// First process: the provider is down, the call is queued (on disk
	// before Invoke returns), then the process stops.
	st, err := boltstore.Open(path)
	if err != nil {
		fmt.Println(err)
		return
	}
	fb, _ := failback.New(cluster.NewStaticDirectory(p), failback.WithStore(st, nil), failback.WithPolicy(policy))
	inv := &cluster.Invocation{Method: "Notify", Args: []any{"order-7 shipped"},
		Attachments: map[string]string{failback.IdempotencyKey: "order-7-shipped"}}
	res, err := fb.Invoke(context.Background(), inv)
	fmt.Println("queued:", res == nil && err == nil)
	_ = fb.Close() // the calls it drops stay in the store
	_ = st.Close()

	// Second process: the same file, the provider is back.
	p.mu.Lock()
	p.isUp = true
	p.mu.Unlock()
	st, _ = boltstore.Open(path)
	defer st.Close()
	fb, _ = failback.New(cluster.NewStaticDirectory(p), failback.WithStore(st, nil), failback.WithPolicy(policy))
	defer fb.Close()
	s := fb.Stats() // the loaded call may already be running, or delivered
	fmt.Println("loaded:", s.Queued+s.InFlight+int(s.Succeeded))
	<-p.done
	fmt.Println(p.first)
	// Output:
	// queued: true
	// loaded: 1
	// delivered [order-7 shipped] (key order-7-shipped)
}
