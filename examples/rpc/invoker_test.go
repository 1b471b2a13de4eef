package main

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/cluster"
	"github.com/rebound-go/rebound/failback"
	"github.com/rebound-go/rebound/subscriber"
)

// dialTest returns an invoker for the server at addr ("ip:port"), closed at
// the end of the test.
func dialTest(t *testing.T, addr string, timeout time.Duration) cluster.Invoker {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := strconv.ParseUint(port, 10, 16)
	inv, err := dialHTTP(invokerOptions{timeout: timeout, maxConns: 2})(subscriber.Instance{IP: host, Port: p})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = inv.(*httpInvoker).Close() })
	return inv
}

func notifyInv(id int) *cluster.Invocation {
	return &cluster.Invocation{Method: "Notify", Args: []any{Notification{ID: id, To: "u"}},
		Attachments: map[string]string{"Notification-Id": strconv.Itoa(id)}}
}

// TestInvokerClassifiesAnswers: what each answer of a real HTTP server
// becomes, and whether failback's default classifier retries it.
func TestInvokerClassifiesAnswers(t *testing.T) {
	cases := []struct {
		name       string
		handler    http.HandlerFunc
		retryable  bool
		status     int
		retryAfter time.Duration // 0: none
	}{
		{"200", func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/Notify" || r.Header.Get("Notification-Id") != "7" || r.Header.Get("Content-Type") != "application/json" {
				w.WriteHeader(http.StatusTeapot)
				return
			}
			var n Notification
			_ = json.NewDecoder(r.Body).Decode(&n)
			_ = json.NewEncoder(w).Encode(map[string]int{"id": n.ID})
		}, false, 0, 0},
		{"400 is permanent", func(w http.ResponseWriter, _ *http.Request) {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "no recipient"})
		}, false, 400, 0},
		{"404 is permanent", http.NotFound, false, 404, 0},
		{"503 with Retry-After", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Retry-After", "2")
			w.WriteHeader(http.StatusServiceUnavailable)
		}, true, 503, 2 * time.Second},
		{"500 without Retry-After", func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusInternalServerError)
		}, true, 500, 0},
		{"429 is transient", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
		}, true, 429, time.Second},
		{"reset mid-answer", func(w http.ResponseWriter, _ *http.Request) {
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				_ = conn.(*net.TCPConn).SetLinger(0) // RST
				_ = conn.Close()
			}
		}, true, 0, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(tc.handler)
			defer srv.Close()
			inv := dialTest(t, srv.Listener.Addr().String(), 5*time.Second)
			res, err := inv.Invoke(context.Background(), notifyInv(7))
			if tc.status == 0 && !tc.retryable {
				if err != nil {
					t.Fatalf("Invoke: %v", err)
				}
				if got := string(res.(json.RawMessage)); got != "{\"id\":7}\n" {
					t.Fatalf("result %q", got)
				}
				return
			}
			if err == nil {
				t.Fatal("Invoke succeeded, want an error")
			}
			if got := failback.DefaultRetryable(err); got != tc.retryable {
				t.Errorf("DefaultRetryable(%v) = %v, want %v", err, got, tc.retryable)
			}
			if got := rebound.IsTransient(err); got != tc.retryable {
				t.Errorf("IsTransient(%v) = %v, want %v", err, got, tc.retryable)
			}
			if got := rebound.IsPermanent(err); got == tc.retryable {
				t.Errorf("IsPermanent(%v) = %v, want %v", err, got, !tc.retryable)
			}
			if got := statusOf(err); got != tc.status {
				t.Errorf("status %d, want %d (%v)", got, tc.status, err)
			}
			d, ok := rebound.RetryAfterDelay(err)
			if ok != (tc.retryAfter > 0) || d != tc.retryAfter {
				t.Errorf("RetryAfterDelay = %v, %v; want %v", d, ok, tc.retryAfter)
			}
		})
	}
}

// TestInvokerNoAnswer: a closed port and a provider that does not answer
// in time are transient; the caller's own cancellation is not.
func TestInvokerNoAnswer(t *testing.T) {
	t.Run("refused", func(t *testing.T) {
		ln, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		_ = ln.Close()
		_, err = dialTest(t, addr, 5*time.Second).Invoke(context.Background(), notifyInv(1))
		if !rebound.IsTransient(err) || !failback.DefaultRetryable(err) {
			t.Fatalf("refused: %v, want transient", err)
		}
	})

	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)

	t.Run("own timeout", func(t *testing.T) {
		_, err := dialTest(t, srv.Listener.Addr().String(), 50*time.Millisecond).Invoke(context.Background(), notifyInv(2))
		if !rebound.IsTransient(err) || !failback.DefaultRetryable(err) {
			t.Fatalf("timeout: %v, want transient", err)
		}
	})
	t.Run("caller cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		inv := dialTest(t, srv.Listener.Addr().String(), 10*time.Second)
		errc := make(chan error, 1)
		go func() {
			_, err := inv.Invoke(ctx, notifyInv(3))
			errc <- err
		}()
		cancel()
		err := <-errc
		if !errors.Is(err, context.Canceled) || rebound.IsTransient(err) || failback.DefaultRetryable(err) {
			t.Fatalf("cancelled: %v, want context.Canceled, not retryable", err)
		}
	})
}

func TestInvokerRejectsBadInvocations(t *testing.T) {
	inv := dialTest(t, "127.0.0.1:9", time.Second)
	for _, bad := range []*cluster.Invocation{
		{Method: "", Args: []any{1}},
		{Method: "a/b", Args: []any{1}},
		{Method: "Notify"},
		{Method: "Notify", Args: []any{func() {}}}, // not JSON
	} {
		if _, err := inv.Invoke(context.Background(), bad); !rebound.IsPermanent(err) {
			t.Errorf("Invoke(%+v) = %v, want a permanent error", bad, err)
		}
	}
	if _, err := dialHTTP(invokerOptions{timeout: time.Second})(subscriber.Instance{IP: "127.0.0.1"}); err == nil {
		t.Error("dial of an instance with port 0 succeeded")
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"", 0, false},
		{"3", 3 * time.Second, true},
		{" 0 ", 0, true},
		{"-1", 0, false},
		{"soon", 0, false},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second, true},
		{now.Add(-time.Hour).Format(http.TimeFormat), 0, true},
	} {
		got, ok := parseRetryAfter(tc.in, now)
		if got != tc.want || ok != tc.ok {
			t.Errorf("parseRetryAfter(%q) = %v, %v; want %v, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}
