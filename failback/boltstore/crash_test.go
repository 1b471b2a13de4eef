package boltstore_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// provider counts deliveries per idempotency key; while down it answers
// 503 to all but one call in okEvery.
type provider struct {
	mu        sync.Mutex
	okEvery   int // 0: always 503
	seen      int
	delivered map[string]int // successful deliveries per key
	refused   int
}

func (p *provider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get("Idempotency-Key")
	p.mu.Lock()
	p.seen++
	ok := p.okEvery > 0 && p.seen%p.okEvery == 0
	if ok {
		p.delivered[key]++
	} else {
		p.refused++
	}
	p.mu.Unlock()
	if !ok {
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	}
	// Served, but the answer takes a while: an attempt the provider has
	// counted can still be running in the child when it dies.
	time.Sleep(2 * time.Millisecond)
}

func (p *provider) set(okEvery int) {
	p.mu.Lock()
	p.okEvery = okEvery
	p.mu.Unlock()
}

// TestCrashAndRestart re-executes the test binary as a child that queues
// calls against a provider that is down, then, while the provider is
// half down (one call in 2 gets through), dies with os.Exit in the
// middle of its retries — no Close, attempts running. A second child on
// the same file loads what is left and finishes it with the provider up.
// Every call is delivered (0 lost); a call is delivered twice only if its
// attempt was running when the first child died, so duplicates are at most
// the child's number of workers.
func TestCrashAndRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("re-executes the test binary")
	}
	const calls, crashAt = 300, 60
	p := &provider{delivered: map[string]int{}}
	srv := httptest.NewServer(p)
	defer srv.Close()
	db := filepath.Join(t.TempDir(), "calls.db")

	start := func(life string) (*exec.Cmd, *bufio.Scanner) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		t.Cleanup(cancel)
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), envChild+"="+life, envDB+"="+db, envURL+"="+srv.URL,
			fmt.Sprintf("%s=%d", envCalls, calls), fmt.Sprintf("%s=%d", envCrashAt, crashAt))
		cmd.Stderr = os.Stderr
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd, bufio.NewScanner(stdout)
	}

	// First life: everything queued while the provider is down.
	cmd, out := start("1")
	if !out.Scan() || out.Text() != fmt.Sprintf("queued %d", calls) {
		t.Fatalf("child 1 said %q (%v), want queued %d", out.Text(), out.Err(), calls)
	}
	p.set(2) // a partial outage: the child retries, half the calls get through
	err := cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 3 {
		t.Fatalf("child 1 ended with %v, want exit status 3 (the crash)", err)
	}
	p.mu.Lock()
	firstLife := 0
	for _, n := range p.delivered {
		firstLife += n
	}
	p.mu.Unlock()

	// Second life: the provider is up.
	p.set(1)
	cmd, out = start("2")
	if !out.Scan() || !strings.HasPrefix(out.Text(), "loaded ") {
		t.Fatalf("child 2 said %q (%v)", out.Text(), out.Err())
	}
	report := out.Text()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child 2: %v", err)
	}

	p.mu.Lock()
	defer p.mu.Unlock()
	lost, dups := 0, 0
	for i := range calls {
		n := p.delivered[fmt.Sprintf("call-%d", i)]
		if n == 0 {
			lost++
		}
		dups += max(n-1, 0)
	}
	t.Logf("first life: %d delivered before the crash (exit after %d successes); second life: %s; lost %d, duplicates %d (bound %d), 503s %d",
		firstLife, crashAt, report, lost, dups, childConcurrency, p.refused)
	if lost != 0 {
		t.Errorf("%d calls lost", lost)
	}
	if dups > childConcurrency {
		t.Errorf("%d duplicates, more than the %d attempts that can run at once", dups, childConcurrency)
	}
	if !strings.HasSuffix(report, " left 0") {
		t.Errorf("second life: %s; want no call left in the store", report)
	}
	if len(p.delivered) != calls {
		t.Errorf("%d keys delivered, want %d", len(p.delivered), calls)
	}
}
