package rebound_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/cluster"
	"github.com/rebound-go/rebound/failback"
	"github.com/rebound-go/rebound/reboundhttp"
	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/subscribertest"
)

// The README's Go snippets are the bodies of functions in this file and in
// subscriber/nacos/readme_snippet_test.go, between "// README snippet:"
// and "// README snippet end" lines. TestREADMESnippets checks that every
// Go block of README.md is one of them, verbatim, so that what the README
// shows is what these tests compile and run.

func readmeRetry(ctx context.Context, sync func(context.Context) error, errNotFound error) error {
	// README snippet: retry
	// 1 s doubling to 30 s, full jitter, at most 5 attempts; every wait ends with ctx.
	err := rebound.Retry(ctx, rebound.Policy{}, func(ctx context.Context) error {
		err := sync(ctx)
		if errors.Is(err, errNotFound) {
			return rebound.Permanent(err) // retrying cannot help: stop now
		}
		return err // retried
	}, rebound.WithMaxAttempts(5))
	// errors.Is(err, rebound.ErrExhausted) after 5 failures; errors.Is(err, <the last error>) always.
	// README snippet end
	return err
}

func readmeFailback(ctx context.Context, m *subscriber.Manager, dial func(subscriber.Instance) (cluster.Invoker, error)) error {
	// README snippet: failback
	dir, err := cluster.NewRegistryDirectory(dial) // dial: subscriber.Instance -> cluster.Invoker
	if err != nil {
		return err
	}
	defer dir.Close()
	if _, err := m.Subscribe(ctx, subscriber.Key{Service: "notify"}, dir.Update); err != nil {
		return err
	}
	// Default: 3 retries, jittered, 5 to 60 s apart, of rebound.Transient and network
	// errors only: a plain errors.New comes back unretried (failback.WithRetryable).
	fb, err := failback.New(dir)
	if err != nil {
		return err
	}
	defer fb.Shutdown(ctx) // waits for the queued retries, bounded by ctx
	_, err = fb.Invoke(ctx, &cluster.Invocation{Method: "Notify", Args: []any{"order 42 shipped"}})
	return err // nil: delivered, or queued for retry; else the error (and why it was not queued)
	// README snippet end
}

func readmeHTTP(url string, order []byte) (*http.Response, error) {
	// README snippet: http
	// GETs, PUTs and keyed requests retried on 429/502/503/504 and network errors, at most 4 attempts,
	// Retry-After honoured; a POST without a key only when the server never saw it.
	rt, err := reboundhttp.New(http.DefaultTransport, rebound.Policy{},
		reboundhttp.WithOptions(rebound.WithMaxAttempts(4)),
		reboundhttp.WithIdempotencyKey(nil)) // each request gets a key, the same on every attempt
	if err != nil {
		return nil, err
	}
	client := &http.Client{Transport: rt, Timeout: 10 * time.Second} // no wait outlives the Timeout
	return client.Post(url, "application/json", bytes.NewReader(order))
	// README snippet end
}

// TestREADMEHTTP runs the HTTP snippet against a local server that answers
// 503 once: the POST, keyed, is sent twice with the same key.
func TestREADMEHTTP(t *testing.T) {
	var mu sync.Mutex
	var keys []string
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		keys = append(keys, r.Header.Get("Idempotency-Key"))
		if len(keys) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer ts.Close()
	defer http.DefaultTransport.(*http.Transport).CloseIdleConnections()
	resp, err := readmeHTTP(ts.URL, []byte(`{"order":42}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	mu.Lock()
	defer mu.Unlock()
	if resp.StatusCode != 200 || len(keys) != 2 || keys[0] == "" || keys[0] != keys[1] {
		t.Fatalf("status %d, keys %q; want 200 after two attempts with one key", resp.StatusCode, keys)
	}
}

// TestREADMERetry runs the Retry snippet on the fake clock: two transient
// failures, then an error that retrying cannot help.
func TestREADMERetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		errNotFound := errors.New("404 no such user")
		calls := 0
		start := time.Now()
		err := readmeRetry(t.Context(), func(context.Context) error {
			if calls++; calls < 3 {
				return errors.New("connection refused")
			}
			return errNotFound
		}, errNotFound)
		if calls != 3 || !errors.Is(err, errNotFound) || errors.Is(err, rebound.ErrExhausted) {
			t.Fatalf("%d calls, %v; want 3, the permanent error, not exhausted", calls, err)
		}
		// Two waits, of at most 1 s and 2 s (full jitter).
		if d := time.Since(start); d <= 0 || d > 3*time.Second {
			t.Fatalf("took %v, want (0, 3s]", d)
		}

		calls = 0
		err = readmeRetry(t.Context(), func(context.Context) error { calls++; return errors.New("connection refused") }, errNotFound)
		if calls != 5 || !errors.Is(err, rebound.ErrExhausted) || !strings.Contains(err.Error(), "connection refused") {
			t.Fatalf("%d calls, %v; want 5 and exhausted with the last error", calls, err)
		}
	})
}

// flaky fails the first call as a network error would (transient), then
// succeeds.
type flaky struct {
	target string
	calls  atomic.Int32
}

func (f *flaky) Target() string { return f.target }
func (f *flaky) Invoke(ctx context.Context, inv *cluster.Invocation) (any, error) {
	if f.calls.Add(1) == 1 {
		return nil, rebound.Transient(errors.New("connection reset by peer"))
	}
	return "ok", nil
}

// TestREADMEFailback runs the failback snippet on the fake clock against
// the in-memory registry: the first attempt fails, Invoke returns nil (the
// call is queued), and the deferred Shutdown waits for the retry, which is
// delivered.
func TestREADMEFailback(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := subscribertest.New()
		reg.Set(subscriber.Key{Service: "notify"}, subscribertest.Instance("10.0.0.1", 8080))
		m, err := subscriber.New(reg)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		var mu sync.Mutex
		var invokers []*flaky
		dial := func(in subscriber.Instance) (cluster.Invoker, error) {
			f := &flaky{target: fmt.Sprintf("%s:%d", in.IP, in.Port)}
			mu.Lock()
			invokers = append(invokers, f)
			mu.Unlock()
			return f, nil
		}
		start := time.Now()
		if err := readmeFailback(t.Context(), m, dial); err != nil {
			t.Fatalf("readmeFailback: %v", err)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(invokers) != 1 || invokers[0].calls.Load() != 2 {
			t.Fatalf("%d invokers, calls %v; want one provider called twice (the failure, then the retry)", len(invokers), invokers)
		}
		if d := time.Since(start); d < 5*time.Second || d > time.Minute {
			t.Fatalf("the retry was delivered %v after the call, want between 5 s and 1 min (failback.DefaultPolicy)", d)
		}
	})
}

// readmeSnippetFiles hold the functions whose bodies the README shows.
var readmeSnippetFiles = []string{
	"readme_snippets_test.go",
	filepath.Join("subscriber", "nacos", "readme_snippet_test.go"),
}

// TestREADMESnippets checks that every Go block of README.md is a snippet
// of readmeSnippetFiles, verbatim (after removing the one tab of function
// body indentation), and that every snippet is in the README.
func TestREADMESnippets(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	snippets := map[string]string{} // name -> text
	for _, f := range readmeSnippetFiles {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		// The markers are comment lines in a function body: a newline and
		// a tab before them (this function's string literals have neither).
		for _, part := range strings.Split(string(src), "\n\t// README snippet: ")[1:] {
			name, rest, _ := strings.Cut(part, "\n")
			body, _, ok := strings.Cut(rest, "\n\t// README snippet end")
			if !ok {
				t.Fatalf("%s: snippet %q has no end line", f, name)
			}
			snippets[name] = dedent(body)
		}
	}
	if len(snippets) < 4 {
		t.Fatalf("found %d snippets, want 4", len(snippets))
	}
	var blocks []string
	for _, part := range strings.Split(string(readme), "```go\n")[1:] {
		block, _, ok := strings.Cut(part, "```")
		if !ok {
			t.Fatal("README.md: a ```go block is not closed")
		}
		blocks = append(blocks, trim(block))
	}
	used := map[string]bool{}
	for i, b := range blocks {
		found := false
		for name, s := range snippets {
			if b == s {
				found, used[name] = true, true
			}
		}
		if !found {
			t.Errorf("README.md's Go block %d is not a tested snippet (update %v):\n%s", i+1, readmeSnippetFiles, b)
		}
	}
	for name := range snippets {
		if !used[name] {
			t.Errorf("snippet %q is not in README.md", name)
		}
	}
}

// dedent removes the leading tab of every line (the snippets are inside a
// function body), then trims as trim does.
func dedent(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimPrefix(l, "\t")
	}
	return trim(strings.Join(lines, "\n"))
}

// trim removes trailing blanks from every line and blank lines around the
// text.
func trim(s string) string {
	lines := strings.Split(strings.Trim(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " \t")
	}
	return strings.Join(lines, "\n") + "\n"
}
