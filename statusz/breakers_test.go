package statusz_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sony/gobreaker/v2"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/cluster"
	"github.com/rebound-go/rebound/failback"
	"github.com/rebound-go/rebound/statusz"
)

// bkProvider answers UNAVAILABLE (a transient error) while down.
type bkProvider struct {
	target string
	down   atomic.Bool
}

func (p *bkProvider) Target() string { return p.target }
func (p *bkProvider) Invoke(context.Context, *cluster.Invocation) (any, error) {
	if p.down.Load() {
		return nil, rebound.Transient(errors.New("UNAVAILABLE"))
	}
	return "ok", nil
}

// xssTarget is a target as a registry might hold it: registry data, shown
// on the page, must be escaped.
const xssTarget = `<script>alert(1)</script>:20880`

func getPage(t *testing.T, h http.Handler, query string) (string, statusz.Page) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/debug/rebound"+query, nil))
	if rec.Code != 200 {
		t.Fatalf("GET %s: %d %s", query, rec.Code, rec.Body)
	}
	var p statusz.Page
	if strings.Contains(query, "format=json") {
		if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil {
			t.Fatalf("JSON: %v\n%s", err, rec.Body)
		}
	}
	return rec.Body.String(), p
}

// The failback section lists the open breakers of the directory its
// invoker calls through (target, state, since, next probe, ejected) and
// the retries that waited for them; a directory of its own name gets its
// own section, where an open breaker over the ejection share shows as
// still called. Real BreakerDirectories driven open by failing calls;
// time is synctest's.
func TestBreakers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		inv := &cluster.Invocation{Method: "Notify"}
		start := time.Now()

		// "notify": a failback invoker whose lone provider is down.
		lone := &bkProvider{target: xssTarget}
		lone.down.Store(true)
		notifyDir, err := cluster.NewBreakerDirectory(cluster.NewStaticDirectory(lone),
			tripAfter(1, 10*time.Second, failback.DefaultRetryable), cluster.WithMaxEjected(1))
		if err != nil {
			t.Fatal(err)
		}
		fb, err := failback.New(notifyDir, failback.WithPolicy(rebound.Policy{Initial: 100 * time.Millisecond, Max: time.Second}, rebound.WithMaxAttempts(4)))
		if err != nil {
			t.Fatal(err)
		}
		defer fb.Close()
		if _, err := fb.Invoke(ctx, inv); err != nil {
			t.Fatal(err)
		}

		// "orders": three providers, two down; with the default share
		// (half of 3: one) the first to open is ejected, the second is
		// still called.
		ps := []*bkProvider{{target: "10.0.0.1:20880"}, {target: "10.0.0.2:20880"}, {target: "10.0.0.3:20880"}}
		ps[1].down.Store(true)
		ps[2].down.Store(true)
		ordersDir, err := cluster.NewBreakerDirectory(cluster.NewStaticDirectory(ps[0], ps[1], ps[2]),
			tripAfter(1, 10*time.Second, nil))
		if err != nil {
			t.Fatal(err)
		}
		for _, i := range []int{2, 1} { // .3 opens first, .2 a second later
			ivs, err := ordersDir.List(ctx, inv)
			if err != nil {
				t.Fatal(err)
			}
			for _, iv := range ivs {
				if iv.Target() == ps[i].target {
					if _, err := iv.Invoke(ctx, inv); err == nil {
						t.Fatalf("%s answered", ps[i].target)
					}
				}
			}
			time.Sleep(time.Second)
		}
		if _, err := ordersDir.List(ctx, inv); err != nil { // records who is ejected
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second) // 4 s after start
		synctest.Wait()

		h := newHandler(t, statusz.WithBreakers("notify", notifyDir), statusz.WithFailback("notify", fb),
			statusz.WithBreakers("orders", ordersDir))

		_, p := getPage(t, h, "?format=json")
		if len(p.Failback) != 1 || len(p.Breakers) != 1 {
			t.Fatalf("failback %+v, breakers %+v: want one of each", p.Failback, p.Breakers)
		}
		fp := p.Failback[0]
		if fp.BreakerWaits != 1 || fp.Retried != 0 {
			t.Errorf("failback breaker_waits %d, retried %d: want 1 and 0", fp.BreakerWaits, fp.Retried)
		}
		want := statusz.BreakerRow{Target: xssTarget, State: "open", Since: start, Until: start.Add(10 * time.Second),
			Ejected: true, Requests: 0, TotalFailures: 0}
		if len(fp.Breakers) != 1 || !sameRow(fp.Breakers[0], want) {
			t.Fatalf("failback breakers %+v, want [%+v]", fp.Breakers, want)
		}
		bp := p.Breakers[0]
		if bp.Name != "orders" || len(bp.Breakers) != 2 {
			t.Fatalf("breakers section %+v, want orders with 2 rows", bp)
		}
		for i, w := range []statusz.BreakerRow{
			{Target: "10.0.0.3:20880", State: "open", Since: start, Until: start.Add(10 * time.Second), Ejected: true},
			{Target: "10.0.0.2:20880", State: "open", Since: start.Add(time.Second), Until: start.Add(11 * time.Second), Ejected: false},
		} {
			if !sameRow(bp.Breakers[i], w) {
				t.Errorf("orders row %d: %+v, want %+v", i, bp.Breakers[i], w)
			}
		}

		html, _ := getPage(t, h, "")
		for _, s := range []string{
			`&lt;script&gt;alert(1)&lt;/script&gt;:20880`, // escaped
			`<td class="n breaker-waits">1</td>`,
			`<h2>Circuit breakers: orders</h2>`,
			`over the share, still called`,
			`<td>4s</td>`,                      // open for 4 s (.3)
			`<span class="muted">in 6s</span>`, // next probe
			`<span class="muted">in 7s</span>`, // .2's
			`<td>ejected</td>`,
		} {
			if !strings.Contains(html, s) {
				t.Errorf("HTML lacks %q:\n%s", s, html)
			}
		}
		if strings.Contains(html, xssTarget) || strings.Contains(html, "<script") {
			t.Errorf("HTML has the target unescaped:\n%s", html)
		}
		if strings.Index(html, "10.0.0.3:20880") > strings.Index(html, "10.0.0.2:20880") {
			t.Error("HTML lists .2 before .3, which opened first")
		}

		// Past the open timeout the orders breakers are half-open: no
		// next probe time, listed for a probe.
		time.Sleep(8 * time.Second)
		_, p = getPage(t, h, "?format=json")
		for _, r := range p.Breakers[0].Breakers {
			if r.State != "half-open" || !r.Until.IsZero() {
				t.Errorf("12 s in: %+v, want half-open without until", r)
			}
		}
		html, _ = getPage(t, h, "")
		if !strings.Contains(html, `<span class="muted">probing</span>`) || !strings.Contains(html, `class="half-open"`) {
			t.Errorf("HTML at 12 s lacks the half-open rows:\n%s", html)
		}

		// Recovered and closed: "no open breaker", an empty list in JSON.
		for _, pr := range ps {
			pr.down.Store(false)
		}
		ivs, _ := ordersDir.List(ctx, inv)
		for _, iv := range ivs {
			_, _ = iv.Invoke(ctx, inv)
		}
		body, p := getPage(t, h, "?format=json")
		if got := p.Breakers[0].Breakers; got == nil || len(got) != 0 || !strings.Contains(body, `"breakers": []`) {
			t.Errorf("after recovery: %+v, want an empty list", got)
		}
		html, _ = getPage(t, h, "")
		if !strings.Contains(html, "no open breaker") {
			t.Errorf("HTML after recovery lacks \"no open breaker\":\n%s", html)
		}
	})
}

func sameRow(a, b statusz.BreakerRow) bool {
	return a.Target == b.Target && a.State == b.State && a.Since.Equal(b.Since) && a.Until.Equal(b.Until) && a.Ejected == b.Ejected
}

// A failback section without a breaker source has no breaker list in
// JSON (not an empty one), and no breaker table.
func TestBreakersAbsent(t *testing.T) {
	h := newHandler(t, statusz.WithFailback("notify", fakeStats{BreakerWaits: 3}))
	body, p := getPage(t, h, "?format=json")
	if strings.Contains(body, `"breakers": [`) && !strings.Contains(body, `"breakers": []`) || p.Failback[0].Breakers != nil {
		t.Errorf("JSON without a breaker source: %s", body)
	}
	if p.Failback[0].BreakerWaits != 3 || !strings.Contains(body, `"breaker_waits": 3`) {
		t.Errorf("breaker_waits missing: %s", body)
	}
	html, _ := getPage(t, h, "")
	if strings.Contains(html, "Open circuit breakers") {
		t.Errorf("HTML has a breaker table without a source:\n%s", html)
	}
}

func TestWithBreakersBadInput(t *testing.T) {
	dir, err := cluster.NewBreakerDirectory(cluster.NewStaticDirectory())
	if err != nil {
		t.Fatal(err)
	}
	var nilDir *cluster.BreakerDirectory
	for _, c := range []struct {
		name string
		opts []statusz.Option
		arg  string
	}{
		{"nil src", []statusz.Option{statusz.WithBreakers("x", nil)}, "src"},
		{"nil pointer", []statusz.Option{statusz.WithBreakers("x", nilDir)}, "src"},
		{"empty name", []statusz.Option{statusz.WithBreakers(" ", dir)}, "name"},
		{"twice", []statusz.Option{statusz.WithBreakers("x", dir), statusz.WithBreakers("x", dir)}, "name"},
		{"a subscriptions name", []statusz.Option{statusz.WithSubscriptions("x", sample()), statusz.WithBreakers("x", dir)}, "name"},
	} {
		_, err := statusz.New(c.opts...)
		ae, ok := errors.AsType[*rebound.ArgumentError](err)
		if !ok || !errors.Is(err, rebound.ErrInvalidArgument) || ae.Arg != c.arg || ae.Func != "statusz.WithBreakers" {
			t.Errorf("%s: %v, want a *rebound.ArgumentError for %s", c.name, err, c.arg)
		}
	}
	// A failback name is shared on purpose, in either order.
	for _, opts := range [][]statusz.Option{
		{statusz.WithBreakers("x", dir), statusz.WithFailback("x", fakeStats{})},
		{statusz.WithFailback("x", fakeStats{}), statusz.WithBreakers("x", dir)},
	} {
		if _, err := statusz.New(opts...); err != nil {
			t.Errorf("breakers beside their failback section: %v", err)
		}
	}
}

// fakeBreakers is a BreakerSource that returns what it holds, closed
// breakers included.
type fakeBreakers []cluster.BreakerStatus

func (f fakeBreakers) Open() []cluster.BreakerStatus { return f }

// A source's closed breakers are left out; a target with credentials in
// it is scrubbed like an error text.
func TestBreakersScrubAndClosed(t *testing.T) {
	src := fakeBreakers{
		{Target: "10.0.0.1:20880", State: gobreaker.StateClosed, Since: t0},
		{Target: "http://admin:hunter2@10.0.0.2:8080", State: gobreaker.StateOpen, Since: t0, Until: t0.Add(time.Minute)},
	}
	h := newHandler(t, statusz.WithBreakers("orders", src))
	body, p := getPage(t, h, "?format=json")
	rows := p.Breakers[0].Breakers
	if len(rows) != 1 || rows[0].State != "open" || strings.Contains(body, "hunter2") || strings.Contains(body, "10.0.0.1") {
		t.Errorf("JSON: %s, want only the open breaker, its password redacted", body)
	}
	html, _ := getPage(t, h, "")
	if strings.Contains(html, "hunter2") || !strings.Contains(html, "10.0.0.2:8080") || strings.Contains(html, "10.0.0.1") {
		t.Errorf("HTML: want only the open breaker, its password redacted:\n%s", html)
	}
}

// tripAfter is the cluster.WithBreakerSettings of a breaker that trips
// after n consecutive failures and stays open for open; failure, if not
// nil, says which errors are failures.
func tripAfter(n uint32, open time.Duration, failure func(error) bool) cluster.Option {
	return cluster.WithBreakerSettings(func(string) gobreaker.Settings {
		st := gobreaker.Settings{Timeout: open, ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= n }}
		if failure != nil {
			st.IsSuccessful = func(err error) bool { return !failure(err) }
		}
		return st
	})
}
