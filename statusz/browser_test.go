package statusz_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"image/png"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/sony/gobreaker/v2"
	"golang.org/x/time/rate"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/cluster"
	"github.com/rebound-go/rebound/failback"
	"github.com/rebound-go/rebound/statusz"
	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/subscribertest"
)

// chromium finds a Chromium binary: $CHROMIUM, or chromium,
// chromium-browser, google-chrome on PATH.
func chromium() (string, []string) {
	names := []string{"chromium", "chromium-browser", "google-chrome"}
	if p := os.Getenv("CHROMIUM"); p != "" {
		names = append([]string{p}, names...)
	}
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			return p, names
		}
	}
	return "", names
}

// eventually polls cond (real time: a real browser and real timers) until
// it holds or a generous deadline passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	subscribertest.Eventually(t, 30*time.Second, what, cond)
}

func countState(m *subscriber.Manager, st subscriber.State) int {
	n := 0
	for _, s := range m.Status() {
		if s.State == st {
			n++
		}
	}
	return n
}

// The page in a real browser (headless Chromium driven over the DevTools
// protocol): it renders, lists the subscriptions a registry outage left
// retrying first, and a screenshot of it is not blank. Set
// STATUSZ_SCREENSHOT=file.png to keep the screenshot.
func TestBrowser(t *testing.T) {
	exe, names := chromium()
	if exe == "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no Chromium on PATH (looked for %v): CI must install Debian's chromium package (.ci/run does)", names)
		}
		t.Skipf("no Chromium on PATH (looked for %v): install Debian's chromium package (apt-get install chromium) or set CHROMIUM to run this test in a real browser", names)
	}

	// A Manager over the in-memory registry, three subscriptions.
	reg := subscribertest.New()
	m, err := subscriber.New(reg, subscriber.WithPolicy(rebound.Policy{Initial: 20 * time.Millisecond, Max: 200 * time.Millisecond},
		rebound.WithLimiter(rate.NewLimiter(rate.Inf, 0))))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ctx := t.Context()
	for _, svc := range []string{"orders", "payments", "stock"} {
		k := subscriber.Key{Group: "DEFAULT_GROUP", Service: svc}
		reg.Set(k, subscribertest.Instance("10.0.0.1", 8080), subscribertest.Instance("10.0.0.2", 8080))
		if _, err := m.Subscribe(ctx, k, func([]subscriber.Instance) {}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "3 subscribed", func() bool { return countState(m, subscriber.StateSubscribed) == 3 })

	// The outage: the registry goes down; when it comes back, it keeps
	// refusing "payments".
	reg.SetDown(true)
	eventually(t, "3 retrying", func() bool { return countState(m, subscriber.StateRetrying) == 3 })
	reg.SetFailure(func(k subscriber.Key) error {
		if k.Service == "payments" {
			return errors.New("subscribe payments: server busy, password=hunter2")
		}
		return nil
	})
	reg.SetDown(false)
	eventually(t, "2 subscribed, 1 retrying", func() bool {
		return countState(m, subscriber.StateSubscribed) == 2 && countState(m, subscriber.StateRetrying) == 1
	})

	// A failback invoker whose only provider refuses: its calls wait in
	// the queue, and the provider's breaker is open.
	bdir, err := cluster.NewBreakerDirectory(cluster.NewStaticDirectory(refusing{}),
		tripAfter(1, time.Hour, failback.DefaultRetryable), cluster.WithMaxEjected(1))
	if err != nil {
		t.Fatal(err)
	}
	fb, err := failback.New(bdir,
		failback.WithPolicy(rebound.Policy{Initial: time.Hour, Max: time.Hour}))
	if err != nil {
		t.Fatal(err)
	}
	defer fb.Close()
	for range 3 {
		if _, err := fb.Invoke(ctx, &cluster.Invocation{Method: "Notify"}); err != nil {
			t.Fatal(err)
		}
	}

	// A target name as hostile registry data could hold it.
	const hostile = `<img src=x onerror="document.title='owned'">:80`
	xss := fakeBreakers{{Target: hostile, State: gobreaker.StateOpen, Since: time.Now().Add(-time.Minute),
		Until: time.Now().Add(time.Minute), Ejected: true}}

	h, err := statusz.New(statusz.WithSubscriptions("nacos", m), statusz.WithFailback("notify", fb),
		statusz.WithBreakers("notify", bdir), statusz.WithBreakers("hostile", xss))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()

	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx,
		chromedp.ExecPath(exe),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 800),
	)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(allocCtx)
	defer cancelBrowser()
	bctx, cancelTimeout := context.WithTimeout(bctx, 60*time.Second)
	defer cancelTimeout()

	if err := chromedp.Do(bctx,
		chromedp.Navigate(srv.URL+"/debug/rebound"),
		chromedp.WaitVisible(chromedp.CSS(`table.subs tbody tr`)),
	); err != nil {
		t.Fatalf("browser: %v", err)
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("text of %s: %v", sel, err)
		}
		return s
	}
	title, err := chromedp.Run(bctx, chromedp.Title())
	if err != nil {
		t.Fatal(err)
	}
	table := text(`table.subs`)
	firstKey := text(`table.subs tbody tr:first-child td.key`)
	firstState := text(`table.subs tbody tr:first-child td:nth-child(2)`)
	firstErr := text(`table.subs tbody tr:first-child td.err`)
	registry := text(`span.badge`)
	queued := text(`section.failback table.fb tbody td:first-child`)
	lastDelivery := text(`table.subs tbody tr:last-child td:nth-child(8)`)
	openTarget := text(`section.failback table.breakers tbody tr:first-child td.key`)
	openSelection := text(`section.failback table.breakers tbody tr:first-child td:nth-child(6)`)
	hostileTarget := text(`section.breakers table.breakers tbody tr:first-child td.key`)
	injected, err := chromedp.Run(bctx, chromedp.Evaluate[int](`document.querySelectorAll("section.breakers img, section.breakers script").length`))
	if err != nil {
		t.Fatal(err)
	}
	rows, err := chromedp.Run(bctx, chromedp.Evaluate[int](`document.querySelectorAll("table.subs tbody tr").length`))
	if err != nil {
		t.Fatal(err)
	}
	shot, err := chromedp.Run(bctx, chromedp.FullScreenshot(100)) // 100: PNG
	if err != nil {
		t.Fatal(err)
	}
	if title != "rebound status" {
		t.Errorf("title %q", title)
	}
	if rows != 3 {
		t.Errorf("%d rows, want 3:\n%s", rows, table)
	}
	if !strings.HasSuffix(firstKey, "payments") || firstState != "retrying" {
		t.Errorf("first row %q %q, want the retrying payments subscription first:\n%s", firstKey, firstState, table)
	}
	if !strings.Contains(firstErr, "server busy") || strings.Contains(firstErr, "hunter2") {
		t.Errorf("first row's error %q", firstErr)
	}
	if queued != "3" {
		t.Errorf("failback queue shows %q, want 3", queued)
	}
	if openTarget != "10.0.0.9:20880" || openSelection != "ejected" {
		t.Errorf("failback section's open breaker: %q %q, want 10.0.0.9:20880 ejected", openTarget, openSelection)
	}
	if hostileTarget != hostile || injected != 0 {
		t.Errorf("hostile target shown as %q with %d injected elements, want the text as is and none", hostileTarget, injected)
	}
	if registry != "connected" {
		t.Errorf("registry badge %q, want connected", registry)
	}
	if !strings.HasSuffix(lastDelivery, " ago") {
		t.Errorf("a subscribed row's last delivery %q, want an age", lastDelivery)
	}

	img, err := png.Decode(bytes.NewReader(shot))
	if err != nil {
		t.Fatalf("screenshot is not a PNG: %v", err)
	}
	if n := colors(img); n < 16 {
		t.Errorf("screenshot has %d colours: blank?", n)
	}
	if p := os.Getenv("STATUSZ_SCREENSHOT"); p != "" {
		if err := os.WriteFile(p, shot, 0o644); err != nil {
			t.Error(err)
		}
	}
	t.Logf("screenshot %dx%d, %d colours", img.Bounds().Dx(), img.Bounds().Dy(), colors(img))

	// 10,000 subscriptions stay readable: counts, 100 rows a page, the
	// stuck ones first, and the state filter works in the browser.
	big := &fakeSubs{conn: "connected"}
	for i := range 10000 {
		st := subscriber.Status{Key: key(fmt.Sprintf("svc-%05d", i)), State: subscriber.StateSubscribed, Since: t0}
		if i%1000 == 7 {
			st.State, st.LastErr = subscriber.StateRetrying, errConnLost
		}
		big.list = append(big.list, st)
	}
	hb, err := statusz.New(statusz.WithSubscriptions("big", big))
	if err != nil {
		t.Fatal(err)
	}
	bigSrv := httptest.NewServer(hb)
	defer bigSrv.Close()
	if err := chromedp.Do(bctx, chromedp.Navigate(bigSrv.URL+"/"), chromedp.WaitVisible(chromedp.CSS(`table.subs tbody tr`))); err != nil {
		t.Fatal(err)
	}
	bigRows, err := chromedp.Run(bctx, chromedp.Evaluate[int](`document.querySelectorAll("table.subs tbody tr").length`))
	if err != nil {
		t.Fatal(err)
	}
	retryingRows, err := chromedp.Run(bctx, chromedp.Evaluate[int](`document.querySelectorAll("table.subs tbody tr.retrying").length`))
	if err != nil {
		t.Fatal(err)
	}
	if pages := text(`section.manager p.muted`); bigRows != 100 || retryingRows != 10 || !strings.Contains(pages, "page 1 of 100") {
		t.Errorf("10,000 subscriptions: %d rows (%d retrying), %q; want 100 rows, the 10 retrying first, page 1 of 100", bigRows, retryingRows, pages)
	}
	// The "retrying" count links to the filtered view (followed with
	// Navigate, which waits for the new page, rather than a click).
	href, err := chromedp.Run(bctx, chromedp.Evaluate[string](`document.querySelector("p.counts a").href`))
	if err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(bctx, chromedp.Navigate(href), chromedp.WaitVisible(chromedp.CSS(`table.subs tbody tr`))); err != nil {
		t.Fatal(err)
	}
	filtered, err := chromedp.Run(bctx, chromedp.Evaluate[int](`document.querySelectorAll("table.subs tbody tr").length`))
	if err != nil {
		t.Fatal(err)
	}
	if filtered != 10 {
		t.Errorf("after clicking the retrying count: %d rows, want 10", filtered)
	}

	// At a path a client chose ("//evil.example" at the server's root),
	// the browser resolves every link and the form to this page, and the
	// pager and the form keep limit.
	if err := chromedp.Do(bctx, chromedp.Navigate(bigSrv.URL+"//evil.example?limit=10"),
		chromedp.WaitVisible(chromedp.CSS(`table.subs tbody tr`))); err != nil {
		t.Fatal(err)
	}
	targets, err := chromedp.Run(bctx, chromedp.Evaluate[[]string](
		`[...document.querySelectorAll("a")].map(a => a.href).concat([document.querySelector("form").action])`))
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range targets {
		if !strings.HasPrefix(u, bigSrv.URL+"//evil.example?") && u != bigSrv.URL+"//evil.example?limit=10" {
			t.Errorf("the browser resolves a link to %s, want %s//evil.example?...", u, bigSrv.URL)
		}
	}
	next, err := chromedp.Run(bctx, chromedp.Evaluate[string](`[...document.querySelectorAll("nav a")].find(a => a.textContent.startsWith("next")).href`))
	if err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(bctx, chromedp.Navigate(next), chromedp.WaitVisible(chromedp.CSS(`table.subs tbody tr`))); err != nil {
		t.Fatal(err)
	}
	if pages := text(`section.manager p.muted`); !strings.Contains(pages, "page 2 of 1000") {
		t.Errorf("next from ?limit=10 (%s): %q, want page 2 of 1000", next, pages)
	}
	// Submit the filter form as a user does: pick a state, press filter.
	if err := chromedp.Do(bctx,
		chromedp.SetValue(chromedp.CSS(`select[name="state"]`), "retrying"),
		chromedp.Click(chromedp.CSS(`form button`)),
		chromedp.WaitReady(chromedp.CSS(`option[value="retrying"][selected]`)),
	); err != nil {
		t.Fatal(err)
	}
	loc, err := chromedp.Run(bctx, chromedp.Location())
	if err != nil {
		t.Fatal(err)
	}
	if pages := text(`section.manager p.muted`); !strings.HasPrefix(loc, bigSrv.URL+"//evil.example?") ||
		!strings.Contains(loc, "limit=10") || !strings.Contains(pages, "10 matching") {
		t.Errorf("the filter form led to %s: %q, want this page with limit=10, 10 matching", loc, pages)
	}
}

// refusing is a provider whose every call fails with a retryable error.
type refusing struct{}

func (refusing) Target() string { return "10.0.0.9:20880" }
func (refusing) Invoke(context.Context, *cluster.Invocation) (any, error) {
	return nil, fmt.Errorf("dial tcp 10.0.0.9:20880: %w", syscall.ECONNREFUSED)
}

// colors counts the distinct colours of img (up to 1,000).
func colors(img image.Image) int {
	seen := map[[4]uint32]bool{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y += 2 {
		for x := b.Min.X; x < b.Max.X; x += 2 {
			r, g, bl, a := img.At(x, y).RGBA()
			seen[[4]uint32{r, g, bl, a}] = true
			if len(seen) >= 1000 {
				return len(seen)
			}
		}
	}
	return len(seen)
}
