package reboundhttp_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"golang.org/x/time/rate"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/reboundhttp"
)

// TestBreakHostRetrierBuiltWhileLimiterPaused: with WithHostOptions, a
// host's Retrier is compiled at its first request, with WithOptions'
// options. A limiter shared there whose burst is 0 at that moment (paused)
// fails the compile, and the error is kept: every later request to that
// host fails with an *rebound.ArgumentError, also once the limiter grants
// again. Correct: a request made once the limiter grants again is sent.
func TestBreakHostRetrierBuiltWhileLimiterPaused(t *testing.T) {
	lim := rate.NewLimiter(1000, 10)
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader("ok")), Request: r}, nil
	})
	rt := newTransport(t, base, fast, fastLimit, reboundhttp.WithOptions(rebound.WithLimiter(lim)),
		reboundhttp.WithHostOptions(func(string) []rebound.Option { return nil }))
	get := func() (*http.Response, error) {
		req, err := http.NewRequest(http.MethodGet, "http://orders.internal/x", nil)
		if err != nil {
			t.Fatal(err)
		}
		return rt.RoundTrip(req)
	}
	lim.SetBurst(0) // paused
	if resp, err := get(); err == nil {
		resp.Body.Close()
	}
	lim.SetBurst(10) // granting again
	resp, err := get()
	if err != nil {
		t.Fatalf("RoundTrip once the limiter grants again = %v, want the response", err)
	}
	resp.Body.Close()
}
