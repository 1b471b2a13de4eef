package reboundhttp_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/reboundhttp"
)

// BenchmarkSuccess compares a GET that succeeds at once through the
// bare http.Transport and through a reboundhttp.Transport over it, against
// one local server, in the same run.
func BenchmarkSuccess(b *testing.B) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	}))
	defer ts.Close()
	base := &http.Transport{MaxIdleConnsPerHost: 8}
	defer base.CloseIdleConnections()
	rt, err := reboundhttp.New(base, rebound.Policy{}, reboundhttp.WithOptions(rebound.WithMaxAttempts(3)))
	if err != nil {
		b.Fatal(err)
	}
	req, _ := http.NewRequest("GET", ts.URL, nil)
	get := func(b *testing.B, rt http.RoundTripper) {
		resp, err := rt.RoundTrip(req)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	for range 1000 { // connections, server goroutines and pools warm for both
		get(b, base)
		get(b, rt)
	}
	for _, bc := range []struct {
		name string
		rt   http.RoundTripper
	}{{"bare", base}, {"reboundhttp", rt}, {"bare-after", base}} { // bare twice: the first sub-benchmark runs slower on a loaded machine
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				get(b, bc.rt)
			}
		})
	}
}
