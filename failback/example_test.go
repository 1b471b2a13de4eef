package failback_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/cluster"
	"github.com/rebound-go/rebound/failback"
	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/subscribertest"
)

// flaky refuses its first connection, then succeeds.
type flaky struct{ calls atomic.Int32 }

func (f *flaky) Target() string { return "10.0.0.7:20880" }
func (f *flaky) Invoke(context.Context, *cluster.Invocation) (any, error) {
	if f.calls.Add(1) == 1 {
		return nil, fmt.Errorf("dial tcp 10.0.0.7:20880: %w", syscall.ECONNREFUSED)
	}
	return "ok", nil
}

func ExampleNew() {
	done := make(chan struct{})
	var succeeded string // written before done is closed, read after
	fb, err := failback.New(cluster.NewStaticDirectory(&flaky{}),
		failback.WithPolicy(rebound.Policy{Initial: time.Millisecond, Max: 10 * time.Millisecond}, rebound.WithMaxAttempts(4),
			rebound.WithObserver(rebound.ObserverFunc(func(e rebound.Event) {
				t := e.Detail.(failback.Task)
				switch e.Kind {
				case rebound.EventQueued:
					fmt.Println("queued:", t.Invocation.Method, "-", t.Err)
				case rebound.EventRecovered:
					// On a retry worker, maybe before Invoke has returned.
					succeeded = fmt.Sprintf("succeeded after %d attempts on %s", t.Attempts, t.Target)
					close(done)
				}
			}))))
	if err != nil {
		panic(err)
	}
	// The first attempt fails with a network error: the call is queued and
	// the caller gets (nil, nil).
	res, err := fb.Invoke(context.Background(), &cluster.Invocation{Method: "Notify"})
	fmt.Println("Invoke returned", res, err)
	<-done
	fmt.Println(succeeded)
	if err := fb.Shutdown(context.Background()); err != nil { // nothing left to drain
		panic(err)
	}
	s := fb.Stats()
	fmt.Println("offered", s.Offered, "succeeded", s.Succeeded, "retried", s.Retried)
	// Output:
	// queued: Notify - dial tcp 10.0.0.7:20880: connection refused
	// Invoke returned <nil> <nil>
	// succeeded after 2 attempts on 10.0.0.7:20880
	// offered 1 succeeded 1 retried 1
}

func ExampleDefaultRetryable() {
	errOverloaded := errors.New("provider overloaded")
	custom := func(err error) bool {
		return errors.Is(err, errOverloaded) || failback.DefaultRetryable(err)
	}
	fmt.Println(failback.DefaultRetryable(syscall.ECONNRESET))
	fmt.Println(failback.DefaultRetryable(errOverloaded), custom(errOverloaded))
	fmt.Println(failback.DefaultRetryable(rebound.Transient(errOverloaded)))
	fmt.Println(failback.DefaultRetryable(rebound.Permanent(syscall.ECONNRESET)))
	// Output:
	// true
	// false true
	// true
	// false
}

func ExampleWithMaxTasks() {
	refuse := cluster.NewStaticDirectory() // no provider: every call fails with ErrNoInvokers
	fb, _ := failback.New(refuse, failback.WithMaxTasks(1))
	defer fb.Close()

	_, err := fb.Invoke(context.Background(), &cluster.Invocation{Method: "A"})
	fmt.Println("first:", err) // queued: an empty directory is retryable
	_, err = fb.Invoke(context.Background(), &cluster.Invocation{Method: "B"})
	fmt.Println("second:", errors.Is(err, failback.ErrQueueFull), errors.Is(err, cluster.ErrNoInvokers))
	fmt.Println(err)
	// Output:
	// first: <nil>
	// second: true true
	// failback: call not queued for retry (queue_full): cluster: no invokers available
}

// Example_registry is docs/guide.md's "Fire-and-forget calls with failback":
// a directory that follows a registry subscription (here an in-memory
// registry), waited on for its first providers, a failback invoker over
// it, and the documented teardown order.
func Example_registry() {
	ctx := context.Background()
	reg := subscribertest.New()
	key := subscriber.Key{Service: "orders"}
	reg.Set(key, subscriber.Instance{IP: "10.0.0.7", Port: 20880, Weight: 1, Healthy: true, Enabled: true})
	m, err := subscriber.New(reg)
	if err != nil {
		panic(err)
	}
	dial := func(subscriber.Instance) (cluster.Invoker, error) { return &flaky{}, nil }
	reportDropped := rebound.ObserverFunc(func(e rebound.Event) {
		if t := e.Detail.(failback.Task); e.Kind == rebound.EventDropped {
			fmt.Println("dropped:", t.Reason, t.Err)
		}
	})

	dir, err := cluster.NewRegistryDirectory(dial) // dial: Instance -> cluster.Invoker
	_, err = m.Subscribe(ctx, key, dir.Update)     // the directory follows the registry
	err = dir.WaitReady(ctx)                       // the first providers are listed
	fb, err := failback.New(dir,
		// default: DefaultPolicy(), 3 retries 5-60 s apart, no observer
		failback.WithPolicy(rebound.Policy{Initial: 100 * time.Millisecond}, rebound.WithMaxAttempts(4), rebound.WithObserver(reportDropped)))

	_, err = fb.Invoke(ctx, &cluster.Invocation{Method: "Notify"})
	// nil: delivered or queued for retry; non-nil: not delivered and will not be retried
	fmt.Println("Invoke:", err)

	// Teardown: failback (Shutdown drains, bounded by ctx), then the
	// manager that feeds the directory, then the directory (it closes the
	// invokers).
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	fmt.Println("Shutdown:", fb.Shutdown(sctx))
	s := fb.Stats()
	fmt.Println("offered", s.Offered, "succeeded", s.Succeeded)
	_ = m.Shutdown(sctx)
	_ = dir.Close()
	// Output:
	// Invoke: <nil>
	// Shutdown: <nil>
	// offered 1 succeeded 1
}

// Example_budget: retries draw from a shared rebound.RetryBudget, asked
// when a retry is due. Here the budget allows no retry at all (ratio 0, no
// floor): the failed call is queued, and when its retry is due the budget
// refuses it, and an EventDropped reports it with Reason
// rebound.ErrBudgetExhausted (and its last error).
func Example_budget() {
	budget, err := rebound.NewRetryBudget(0, 0, 10*time.Second)
	if err != nil {
		panic(err)
	}
	dropped := make(chan struct{})
	down := cluster.NewStaticDirectory() // no provider: every call fails with ErrNoInvokers
	fb, err := failback.New(down,
		failback.WithPolicy(rebound.Policy{Initial: time.Millisecond}, rebound.WithBudget(budget),
			rebound.WithObserver(rebound.ObserverFunc(func(e rebound.Event) {
				if t := e.Detail.(failback.Task); e.Kind == rebound.EventDropped {
					fmt.Println("dropped:", t.Reason == rebound.ErrBudgetExhausted, errors.Is(t.Err, cluster.ErrNoInvokers))
					close(dropped)
				}
			}))))
	if err != nil {
		panic(err)
	}
	defer fb.Close()
	_, err = fb.Invoke(context.Background(), &cluster.Invocation{Method: "Notify"})
	fmt.Println("Invoke:", err)
	<-dropped
	fmt.Println("retries sent:", fb.Stats().Retried)
	// Output:
	// Invoke: <nil>
	// dropped: true true
	// retries sent: 0
}

// ExampleWithTTL: a call that is worthless after a second is not
// queued when its first retry would come later than that.
func ExampleWithTTL() {
	down := cluster.NewStaticDirectory()
	fb, err := failback.New(down, failback.WithTTL(time.Second),
		failback.WithPolicy(rebound.Policy{Initial: 5 * time.Second, Jitter: rebound.NoJitter}))
	if err != nil {
		panic(err)
	}
	defer fb.Close()
	_, err = fb.Invoke(context.Background(), &cluster.Invocation{Method: "Notify"})
	fmt.Println(errors.Is(err, failback.ErrExpired))
	fmt.Println(err)
	// Output:
	// true
	// failback: call not queued for retry (expired): cluster: no invokers available
}
