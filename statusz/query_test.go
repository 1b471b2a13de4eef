package statusz_test

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/rebound-go/rebound/statusz"
	"github.com/rebound-go/rebound/subscriber"
)

// page × limit and page offset + limit overflowed: slice bounds out of
// range, and the process died.
func TestHugePageAndLimit(t *testing.T) {
	h := newHandler(t, statusz.WithSubscriptions("nacos", sample()))
	maxInt := fmt.Sprint(math.MaxInt)
	for _, tc := range []struct {
		query string
		keys  string // JSON rows
		pages int
	}{
		{"page=2&limit=" + maxInt, "", 1},
		{"page=1&limit=" + maxInt, "old-retry new-retry pend gone a-ok b-ok", 1},
		{"page=" + maxInt + "&limit=" + maxInt, "", 1},
		{"page=" + maxInt + "&limit=2", "", 3},
		{"page=" + maxInt + "&limit=0", "", 1},
		{"page=" + maxInt, "", 1},
		{"page=3&limit=2", "a-ok b-ok", 3},
	} {
		p := getJSON(t, h, "/?format=json&"+tc.query)
		m := p.Managers[0]
		if got := keys(m.Subscriptions); got != tc.keys || m.Pages != tc.pages || m.Total != 6 {
			t.Errorf("%s: rows %q, %d pages, total %d; want %q, %d pages, total 6", tc.query, got, m.Pages, m.Total, tc.keys, tc.pages)
		}
		resp, body := get(t, h, "/?"+tc.query, "text/html")
		if resp.StatusCode != http.StatusOK || !strings.Contains(body, "6 matching") {
			t.Errorf("HTML %s: %d\n%s", tc.query, resp.StatusCode, body)
		}
	}
	for _, bad := range []string{"page=" + maxInt + "0", "limit=" + maxInt + "0", "page=-1"} {
		if resp, _ := get(t, h, "/?"+bad, ""); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: status %d, want 400", bad, resp.StatusCode)
		}
	}
}

// With ?limit=10, "next" led to page 2 at the default page size (an empty
// "page 2 of 1"): pager, count and JSON links, and the filter form, keep
// every parameter of the query.
func TestLinksKeepLimit(t *testing.T) {
	h := newHandler(t, statusz.WithSubscriptions("nacos", sample())) // 6 rows, page size 100
	_, body := get(t, h, "/debug/rebound?limit=2&q=-&refresh=7", "text/html")
	if !strings.Contains(body, "page 1 of 2") { // q=- matches 4: new-retry old-retry a-ok b-ok
		t.Fatalf("limit=2 page 1:\n%s", body)
	}
	next := hrefs(body, "next »")
	if len(next) != 1 {
		t.Fatalf("next links %v:\n%s", next, body)
	}
	_, body2 := get(t, h, follow("/debug/rebound?limit=2&q=-&refresh=7", next[0]), "text/html")
	if !strings.Contains(body2, "page 2 of 2") || !strings.Contains(body2, key("a-ok").String()) ||
		!strings.Contains(body2, key("b-ok").String()) || strings.Contains(body2, key("old-retry").String()) {
		t.Errorf("next (%s) from ?limit=2 shows:\n%s", next[0], body2)
	}
	for _, l := range allLinks(body2) {
		if strings.HasPrefix(l, "?") && !strings.Contains(l, "format=json") {
			for _, p := range []string{"limit=2", "q=-", "refresh=7"} {
				if !strings.Contains(l, p) {
					t.Errorf("link %q drops %s", l, p)
				}
			}
		}
	}
	prev := hrefs(body2, "« previous")
	if len(prev) != 1 || strings.Contains(prev[0], "page=") {
		t.Errorf("previous links %v, want one to page 1", prev)
	}
	if !strings.Contains(body2, `<input type="hidden" name="limit" value="2">`) {
		t.Errorf("the filter form drops limit:\n%s", body2)
	}
	// The JSON link is the same view.
	j := hrefs(body2, "JSON")
	if len(j) != 1 {
		t.Fatalf("JSON links %v", j)
	}
	p := getJSON(t, h, follow("/debug/rebound?page=2&limit=2&q=-&refresh=7", j[0]))
	if m := p.Managers[0]; keys(m.Subscriptions) != "a-ok b-ok" || m.Page != 2 || m.Pages != 2 {
		t.Errorf("JSON link %s: %q page %d of %d, want a-ok b-ok, page 2 of 2", j[0], keys(m.Subscriptions), m.Page, m.Pages)
	}
	// Without limit, no link adds one.
	_, body3 := get(t, h, "/debug/rebound", "text/html")
	for _, l := range allLinks(body3) {
		if strings.Contains(l, "limit") {
			t.Errorf("link %q adds a limit", l)
		}
	}
	if strings.Contains(body3, `name="limit"`) {
		t.Error("the filter form adds a limit")
	}
}

var (
	anchorRE = regexp.MustCompile(`<a href="([^"]*)">([^<]*)`)
	linkRE   = regexp.MustCompile(`(?:href|action)="([^"]*)"`)
)

// hrefs returns the (unescaped) targets of the anchors whose text starts
// with text.
func hrefs(body, text string) []string {
	var out []string
	for _, m := range anchorRE.FindAllStringSubmatch(body, -1) {
		if strings.HasPrefix(m[2], text) {
			out = append(out, unescape(m[1]))
		}
	}
	return out
}

// allLinks returns every href and action of body, unescaped.
func allLinks(body string) []string {
	var out []string
	for _, m := range linkRE.FindAllStringSubmatch(body, -1) {
		out = append(out, unescape(m[1]))
	}
	return out
}

// follow resolves link against page, as a browser does.
func follow(page, link string) string {
	base, err := url.Parse(page)
	if err != nil {
		panic(err)
	}
	ref, err := url.Parse(link)
	if err != nil {
		return "/invalid-link"
	}
	return base.ResolveReference(ref).String()
}

func unescape(s string) string {
	return strings.NewReplacer("&amp;", "&", "&#43;", "+", "&lt;", "<", "&gt;", ">", "&#34;", `"`, "&#39;", "'").Replace(s)
}

// offSite matches a link that leaves the page's site: a scheme, or a
// network-path reference ("//host", also "/\host" and "\\host", which
// browsers read the same way).
var offSite = regexp.MustCompile(`^(?:[A-Za-z][A-Za-z0-9+.\-]*:|[/\\]{2})`)

// Any query: 200 or 400, never a panic; a 200 is valid JSON or an HTML
// page whose links stay on the page.
func FuzzQuery(f *testing.F) {
	for _, s := range []string{
		"", "page=2&limit=9223372036854775807", "page=9223372036854775807&limit=2", "limit=0&page=5",
		"state=held", "state=stuck&q=retry&refresh=5", "q=%2F%2Fevil.example", "state=odd", "page=0",
		"limit=-1", "refresh=3601", "format=json&limit=1&page=4", "q=<script>&limit=1",
	} {
		f.Add(s, false)
		f.Add(s, true)
	}
	src := sample()
	src.list = append(src.list, subscriber.Status{Key: key("held"), State: subscriber.StateHeld, Since: t0,
		HeldSince: t0, HeldUntil: t0.Add(30e9), HeldReason: "registry restarted"})
	h := newHandler(f, statusz.WithSubscriptions("nacos", src), statusz.WithPageSize(2))
	f.Fuzz(func(t *testing.T, query string, jsonOut bool) {
		req := httptest.NewRequest(http.MethodGet, "/debug/rebound", nil)
		req.URL.RawQuery = query
		if jsonOut {
			req.Header.Set("Accept", "application/json")
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		switch rec.Code {
		case http.StatusBadRequest:
			return
		case http.StatusOK:
		default:
			t.Fatalf("?%s: status %d", query, rec.Code)
		}
		body := rec.Body.String()
		if rec.Header().Get("Content-Type") == "application/json" {
			var p statusz.Page
			if err := json.Unmarshal([]byte(body), &p); err != nil || len(p.Managers) != 1 {
				t.Fatalf("?%s: JSON %v: %s", query, err, body)
			}
			if m := p.Managers[0]; len(m.Subscriptions) > m.Total || m.Pages < 1 {
				t.Fatalf("?%s: %d rows of %d, %d pages", query, len(m.Subscriptions), m.Total, m.Pages)
			}
			return
		}
		for _, l := range allLinks(body) {
			if !strings.HasPrefix(l, "?") || offSite.MatchString(l) {
				t.Fatalf("?%s: link %q is not a query on this page", query, l)
			}
		}
	})
}
