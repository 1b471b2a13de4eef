package boltstore_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/cluster"
	"github.com/rebound-go/rebound/failback"
	"github.com/rebound-go/rebound/failback/boltstore"
)

// Environment of the crash test's child process (see TestCrashAndRestart).
const (
	envChild   = "BOLTSTORE_CRASH_CHILD" // "1": first life, crashes; "2": second life
	envDB      = "BOLTSTORE_CRASH_DB"
	envURL     = "BOLTSTORE_CRASH_URL"
	envCalls   = "BOLTSTORE_CRASH_CALLS"
	envCrashAt = "BOLTSTORE_CRASH_AT" // successes after which the first life exits
)

// childConcurrency is the child's number of retry workers: at most that
// many attempts are running when it dies.
const childConcurrency = 8

// httpInvoker posts a call to the provider, with its idempotency key in a
// header; a 503 is a transient error.
type httpInvoker struct {
	url    string
	client *http.Client
}

func (h httpInvoker) Target() string { return h.url }

func (h httpInvoker) Invoke(ctx context.Context, inv *cluster.Invocation) (any, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Idempotency-Key", inv.Attachments[failback.IdempotencyKey])
	resp, err := h.client.Do(req)
	if err != nil {
		return nil, rebound.Transient(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, rebound.Transient(fmt.Errorf("provider: %s", resp.Status))
	}
	return nil, nil
}

// childMain runs the crash test's child process when the test binary is
// re-executed for it, and reports whether it did (it then never returns:
// it exits).
func childMain() bool {
	life := os.Getenv(envChild)
	if life == "" {
		return false
	}
	err := child(life)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(1)
	}
	os.Exit(0)
	return true
}

func child(life string) error {
	calls, _ := strconv.Atoi(os.Getenv(envCalls))
	crashAt, _ := strconv.ParseInt(os.Getenv(envCrashAt), 10, 64)
	st, err := boltstore.Open(os.Getenv(envDB))
	if err != nil {
		return err
	}
	out := bufio.NewWriter(os.Stdout)
	var succeeded atomic.Int64
	done := make(chan struct{})
	hooks := rebound.ObserverFunc(func(e rebound.Event) {
		if e.Kind != rebound.EventRecovered {
			return
		}
		n := succeeded.Add(1)
		if life == "1" && n == crashAt {
			// The crash: no Close, no flush, other workers mid-attempt.
			os.Exit(3)
		}
	})
	tr := &http.Transport{MaxIdleConnsPerHost: childConcurrency * 2}
	dir := cluster.NewStaticDirectory(httpInvoker{url: os.Getenv(envURL), client: &http.Client{Transport: tr}})
	f, err := failback.New(dir, failback.WithStore(st, nil), failback.WithConcurrency(childConcurrency), failback.WithMaxTasks(calls),
		failback.WithPolicy(rebound.Policy{Initial: 5 * time.Millisecond, Max: 50 * time.Millisecond}, rebound.WithObserver(hooks)))
	if err != nil {
		return err
	}
	if life == "1" {
		for i := range calls {
			inv := &cluster.Invocation{Method: "notify", Args: []any{i},
				Attachments: map[string]string{failback.IdempotencyKey: "call-" + strconv.Itoa(i)}}
			if _, err := f.Invoke(context.Background(), inv); err != nil {
				return fmt.Errorf("Invoke %d: %w", i, err)
			}
		}
		fmt.Fprintf(out, "queued %d\n", calls)
		out.Flush()
		<-done // until the crash
	}
	// Second life: Shutdown drains every loaded call (each ends in a hook);
	// then the store must be empty.
	loaded := f.Stats().Offered
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := f.Shutdown(ctx); err != nil {
		return fmt.Errorf("Shutdown: %w", err)
	}
	left, err := st.Len()
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "loaded %d succeeded %d left %d\n", loaded, succeeded.Load(), left)
	out.Flush()
	if err := errors.Join(f.Close(), st.Close()); err != nil {
		return err
	}
	tr.CloseIdleConnections()
	return nil
}
