package reboundhttp_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/reboundhttp"
)

// fake answers in memory (no sockets, so synctest's clock can advance):
// each response comes from answer, and it records when each attempt was
// made and whether each body was closed.
type fake struct {
	answer func(n int) *http.Response
	times  []time.Time
	bodies []*trackedBody
}

type trackedBody struct {
	io.Reader
	closed atomic.Bool
}

func (b *trackedBody) Close() error { b.closed.Store(true); return nil }

func (f *fake) RoundTrip(req *http.Request) (*http.Response, error) {
	f.times = append(f.times, time.Now())
	resp := f.answer(len(f.times))
	b := &trackedBody{Reader: strings.NewReader("body")}
	f.bodies = append(f.bodies, b)
	resp.Body, resp.Request = b, req
	return resp, nil
}

func status(code int, retryAfter string) *http.Response {
	h := http.Header{}
	if retryAfter != "" {
		h.Set("Retry-After", retryAfter)
	}
	return &http.Response{StatusCode: code, Header: h}
}

func TestRetryAfterHonoured(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		date := time.Now().Add(90 * time.Second).UTC().Format(http.TimeFormat)
		f := &fake{answer: func(n int) *http.Response {
			switch n {
			case 1:
				return status(503, "7")
			case 2:
				return status(429, date)
			case 3:
				return status(503, "99999999") // capped at MaxRetryAfter (5 min)
			}
			return status(200, "")
		}}
		rt, err := reboundhttp.New(f, rebound.Policy{Initial: time.Millisecond, Max: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest("GET", "http://svc/x", nil)
		resp, err := rt.RoundTrip(req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%v %v", resp, err)
		}
		want := []time.Duration{7 * time.Second, 83 * time.Second, 5 * time.Minute} // the date is 90 s after the first attempt
		for i, w := range want {
			if got := f.times[i+1].Sub(f.times[i]); got != w {
				t.Errorf("wait %d: %v, want %v", i+1, got, w)
			}
		}
		for i, b := range f.bodies[:3] {
			if !b.closed.Load() {
				t.Errorf("failed response %d not closed", i+1)
			}
		}
	})
}

func TestRetryAfterPastDeadlineNotWaited(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fake{answer: func(int) *http.Response { return status(503, "60") }}
		rt, _ := reboundhttp.New(f, rebound.Policy{})
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://svc/x", nil)
		t0 := time.Now()
		resp, err := rt.RoundTrip(req)
		if err != nil || resp.StatusCode != 503 || len(f.times) != 1 || time.Since(t0) != 0 {
			t.Fatalf("got %v %v after %d attempts and %v, want the 503 at once", resp, err, len(f.times), time.Since(t0))
		}
		if f.bodies[0].closed.Load() {
			t.Fatal("the returned response's body was closed")
		}
	})
}

func TestContextCancelledDuringWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fake{answer: func(int) *http.Response { return status(503, "10") }}
		rt, _ := reboundhttp.New(f, rebound.Policy{})
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(3*time.Second, cancel)
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://svc/x", nil)
		t0 := time.Now()
		resp, err := rt.RoundTrip(req)
		if resp != nil || !errors.Is(err, context.Canceled) {
			t.Fatalf("got %v %v, want context.Canceled", resp, err)
		}
		if len(f.times) != 1 || time.Since(t0) != 3*time.Second {
			t.Fatalf("%d attempts, returned after %v; want 1 and at the cancel (3s)", len(f.times), time.Since(t0))
		}
		if !f.bodies[0].closed.Load() {
			t.Fatal("the held response was not closed")
		}
	})
}

func TestRetryAfterParsing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, tc := range []struct {
			v    string
			want time.Duration // wait before the 2nd attempt (policy: 1 ms)
		}{
			{"0", time.Millisecond},
			{"-5", time.Millisecond}, // malformed: ignored
			{"soon", time.Millisecond},
			{time.Now().Add(-time.Hour).UTC().Format(http.TimeFormat), time.Millisecond}, // past
			{"123456789012345678901234567890", 5 * time.Minute},
		} {
			f := &fake{answer: func(n int) *http.Response {
				if n == 1 {
					return status(503, tc.v)
				}
				return status(200, "")
			}}
			rt, _ := reboundhttp.New(f, rebound.Policy{Initial: time.Millisecond, Max: time.Millisecond, Jitter: rebound.NoJitter})
			req, _ := http.NewRequest("GET", "http://svc/x", nil)
			if _, err := rt.RoundTrip(req); err != nil {
				t.Fatal(err)
			}
			if got := f.times[1].Sub(f.times[0]); got != tc.want {
				t.Errorf("Retry-After %q: waited %v, want %v", tc.v, got, tc.want)
			}
		}
	})
}
