package statusz_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/failback"
	"github.com/rebound-go/rebound/statusz"
	"github.com/rebound-go/rebound/subscriber"
)

type fakeSubs struct {
	list []subscriber.Status
	conn string
}

func (f *fakeSubs) Status() []subscriber.Status { return f.list }
func (f *fakeSubs) Connected() (bool, bool)     { return f.conn == "connected", f.conn != "" }

type fakeStats failback.Stats

func (f fakeStats) Stats() failback.Stats { return failback.Stats(f) }

var t0 = time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)

// errConnLost is a subscription's last error after its registry connection
// was lost (the Manager's text).
var errConnLost = errors.New("subscriber: registry connection lost")

func key(s string) subscriber.Key { return subscriber.Key{Group: "DEFAULT_GROUP", Service: s} }

func sample() *fakeSubs {
	return &fakeSubs{
		conn: "disconnected",
		list: []subscriber.Status{
			{Key: key("b-ok"), State: subscriber.StateSubscribed, Since: t0.Add(-time.Hour), Instances: 3, Deliveries: 2,
				LastDelivery: t0.Add(-time.Minute)},
			{Key: key("a-ok"), State: subscriber.StateSubscribed, Since: t0.Add(-2 * time.Hour), Instances: 1, Deliveries: 1},
			{Key: key("new-retry"), State: subscriber.StateRetrying, Since: t0.Add(-time.Second), Attempts: 2, TotalAttempts: 9,
				LastErr: errors.New(`Get "http://nacos:hunter2@h/v1": <refused> & down`)},
			{Key: key("old-retry"), State: subscriber.StateRetrying, Since: t0.Add(-time.Minute), Attempts: 7, TotalAttempts: 7,
				LastErr: errConnLost},
			{Key: key("pend"), State: subscriber.StatePending, Since: t0.Add(-5 * time.Second), Attempts: 1, TotalAttempts: 1},
			{Key: key("gone"), State: subscriber.StateStopped, Since: t0.Add(-3 * time.Second), LastErr: errors.New("registry closed")},
		},
	}
}

func newHandler(t testing.TB, opts ...statusz.Option) http.Handler {
	t.Helper()
	h, err := statusz.New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func get(t testing.TB, h http.Handler, target string, accept string) (*http.Response, string) {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, target, nil)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	body, _ := io.ReadAll(rec.Result().Body)
	return rec.Result(), string(body)
}

func getJSON(t testing.TB, h http.Handler, target string) statusz.Page {
	t.Helper()
	resp, body := get(t, h, target, "")
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("%s: %d %s: %s", target, resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	var p statusz.Page
	if err := json.Unmarshal([]byte(body), &p); err != nil {
		t.Fatal(err)
	}
	return p
}

func keys(subs []statusz.Subscription) string {
	var ks []string
	for _, s := range subs {
		ks = append(ks, s.Key[strings.LastIndex(s.Key, "/")+1:]) // the service

	}
	return strings.Join(ks, " ")
}

func TestJSONStuckFirst(t *testing.T) {
	h := newHandler(t, statusz.WithSubscriptions("nacos", sample()),
		statusz.WithFailback("notify", fakeStats{Queued: 4, InFlight: 1, Offered: 10, Succeeded: 5,
			Dropped: map[error]uint64{failback.ErrQueueFull: 2, failback.ErrClosed: 0}}))
	p := getJSON(t, h, "/debug/rebound?format=json")
	if len(p.Managers) != 1 || len(p.Failback) != 1 {
		t.Fatalf("page %+v", p)
	}
	m := p.Managers[0]
	// Retrying (longest first), pending, stopped, then subscribed by key.
	ks := keys(m.Subscriptions)
	if !strings.HasSuffix(ks, "old-retry new-retry pend gone a-ok b-ok") {
		t.Errorf("order: %s", ks)
	}
	if m.Registry != "disconnected" {
		t.Errorf("registry %q", m.Registry)
	}
	if m.Counts["retrying"] != 2 || m.Counts["subscribed"] != 2 || m.Counts["pending"] != 1 || m.Counts["stopped"] != 1 || m.Total != 6 {
		t.Errorf("counts %v total %d", m.Counts, m.Total)
	}
	if e := m.Subscriptions[1].LastError; strings.Contains(e, "hunter2") || !strings.Contains(e, "[REDACTED]") {
		t.Errorf("last error not scrubbed: %q", e)
	}
	if f := p.Failback[0]; f.Name != "notify" || f.Queued != 4 || f.Dropped["queue_full"] != 2 {
		t.Errorf("failback %+v", f)
	}
	// Accept header works too.
	resp, _ := get(t, h, "/debug/rebound", "application/json")
	if resp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("Accept: application/json served %s", resp.Header.Get("Content-Type"))
	}
}

func TestFiltersAndPages(t *testing.T) {
	h := newHandler(t, statusz.WithSubscriptions("nacos", sample()), statusz.WithPageSize(2))
	for q, want := range map[string]string{
		"state=stuck":                "old-retry new-retry pend gone",
		"state=subscribed":           "a-ok b-ok",
		"q=retry":                    "old-retry new-retry",
		"state=stuck&limit=2":        "old-retry new-retry",
		"state=stuck&limit=2&page=2": "pend gone",
		"limit=4&page=3":             "",
	} {
		if got := keys(getJSON(t, h, "/?format=json&"+q).Managers[0].Subscriptions); got != want {
			t.Errorf("%s: %q, want %q", q, got, want)
		}
	}
	// HTML pages by WithPageSize.
	_, body := get(t, h, "/?page=2", "text/html")
	if !strings.Contains(body, "page 2 of 3") || !strings.Contains(body, key("gone").String()) || strings.Contains(body, key("old-retry").String()) {
		t.Errorf("HTML page 2:\n%s", body)
	}
	_, body = get(t, h, "/?refresh=5&state=stuck", "text/html")
	if !strings.Contains(body, `<meta http-equiv="refresh" content="5">`) || !strings.Contains(body, "refresh=5") {
		t.Errorf("refresh=5: no meta refresh, or links drop it:\n%s", body)
	}
	for _, bad := range []string{"state=odd", "page=0", "page=x", "limit=-1", "refresh=0", "refresh=x"} {
		if resp, _ := get(t, h, "/?"+bad, ""); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: status %d, want 400", bad, resp.StatusCode)
		}
	}
	req := httptest.NewRequest(http.MethodPost, "/", nil)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d", rec.Code)
	}
}

func TestHTML(t *testing.T) {
	h := newHandler(t, statusz.WithSubscriptions("nacos", sample()), statusz.WithFailback("notify", fakeStats{Queued: 4}))
	resp, body := get(t, h, "/debug/rebound", "text/html,application/xhtml+xml")
	if ct := resp.Header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
		t.Fatalf("content type %q", ct)
	}
	for _, want := range []string{
		`<tr class="retrying"><td class="key">` + key("old-retry").String() + `</td>`,
		`class="badge disconnected"`,
		`Failback queue: notify`,
		`&lt;refused&gt; &amp; down`, // escaped
		`<b class="count-retrying">2</b>`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("HTML lacks %q", want)
		}
	}
	if strings.Contains(body, "<script") || strings.Contains(body, "hunter2") {
		t.Error("HTML has a script or a credential")
	}
	if strings.Index(body, "old-retry") > strings.Index(body, "a-ok") {
		t.Error("stuck subscriptions are not first")
	}
}

func TestOptions(t *testing.T) {
	var ae *rebound.ArgumentError
	for _, opts := range [][]statusz.Option{
		{statusz.WithSubscriptions("", sample())},
		{statusz.WithSubscriptions("a", nil)},
		{statusz.WithSubscriptions("a", sample()), statusz.WithFailback("a", fakeStats{})},
		{statusz.WithFailback("f", nil)},
		{statusz.WithPageSize(0)},
	} {
		if _, err := statusz.New(opts...); !errors.As(err, &ae) || !errors.Is(err, rebound.ErrInvalidArgument) {
			t.Errorf("New: %v, want an ArgumentError", err)
		}
	}
	h := newHandler(t, nil)
	if _, body := get(t, h, "/", ""); !strings.Contains(body, "Nothing to show") {
		t.Error("empty handler page")
	}
}

// The server time of one page over 10,000 subscriptions, HTML (one page,
// with the counts and the ordering of all) and JSON (all of them).
func BenchmarkRender10000(b *testing.B) {
	src := &fakeSubs{conn: "connected"}
	for i := range 10000 {
		st := subscriber.Status{Key: key(fmt.Sprintf("svc-%05d", i)), State: subscriber.StateSubscribed,
			Since: t0.Add(-time.Duration(i) * time.Second), Instances: 3, Deliveries: 4, TotalAttempts: 1}
		if i%10 == 0 {
			st.State, st.LastErr, st.Attempts = subscriber.StateRetrying, errConnLost, 5
		}
		src.list = append(src.list, st)
	}
	h := newHandler(b, statusz.WithSubscriptions("nacos", src))
	for _, bc := range []struct{ name, target string }{
		{"html", "/debug/rebound"},
		{"html-all", "/debug/rebound?limit=0"},
		{"json-all", "/debug/rebound?format=json"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, bc.target, nil))
				if rec.Code != http.StatusOK {
					b.Fatal(rec.Code)
				}
			}
		})
	}
}
