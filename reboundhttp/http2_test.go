package reboundhttp_test

import (
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/rebound-go/rebound/reboundhttp"
)

// TestHTTP2GOAWAYNeverDuplicatesPOST runs concurrent POSTs (no key) over
// real HTTP/2 against a server that answers every request with
// "Connection: close", that is a graceful GOAWAY: streams the server had
// not received when it sent it fail as unprocessed (net/http's transport
// resends those itself when it can rewind the body). Every POST must be
// applied at most once, and once if it was answered.
func TestHTTP2GOAWAYNeverDuplicatesPOST(t *testing.T) {
	var mu sync.Mutex
	applied := map[string]int{}
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor != 2 {
			t.Errorf("request over %s, want HTTP/2", r.Proto)
		}
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		applied[string(b)]++
		mu.Unlock()
		w.Header().Set("Connection", "close")
		io.WriteString(w, "ok")
	}))
	ts.EnableHTTP2 = true
	ts.Config.ErrorLog = log.New(io.Discard, "", 0) // handshakes the client abandons
	ts.StartTLS()
	defer ts.Close()
	base := ts.Client().Transport.(*http.Transport)
	defer base.CloseIdleConnections()
	rt, err := reboundhttp.New(base, fast, fastLimit)
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Transport: rt}
	var wg sync.WaitGroup
	var failed, ok sync.Map
	for i := range 100 {
		wg.Go(func() {
			body := "order-" + string(rune('a'+i%26)) + "-" + strings.Repeat("x", i)
			var r io.Reader = strings.NewReader(body)
			rewind := i%2 == 0
			if !rewind {
				r = io.NopCloser(r) // no GetBody: sent once
			}
			resp, err := c.Post(ts.URL, "text/plain", r)
			if err != nil {
				// An outcome net/http could not settle (the server closed
				// the connection with streams in flight: "client connection
				// force closed") is not resent, with GetBody or without.
				failed.Store(body, err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			ok.Store(body, true)
		})
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	for body, n := range applied {
		if n > 1 {
			t.Errorf("POST %q applied %d times", body[:min(len(body), 12)], n)
		}
	}
	ok.Range(func(k, _ any) bool {
		if applied[k.(string)] != 1 {
			t.Errorf("POST %q succeeded but applied %d times", k.(string)[:10], applied[k.(string)])
		}
		return true
	})
	n, m := 0, 0
	failed.Range(func(k, v any) bool { n++; return true })
	ok.Range(func(k, v any) bool { m++; return true })
	if m == 0 {
		t.Error("no POST succeeded")
	}
	t.Logf("%d POSTs applied, %d answered, %d failed and not resent", len(applied), m, n)
}
