package statusz_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/rebound-go/rebound/statusz"
)

// Links and the filter form were built from the request's path: at a
// server's root, or under http.StripPrefix, a request for
// "//evil.example" rendered href="//evil.example?..." (a link to another
// site on an operator's page). Each link must stay on the page, and work:
// followed with a real client, each reaches the same page.
func TestLinksStayOnThePage(t *testing.T) {
	h := newHandler(t, statusz.WithSubscriptions("nacos", sample()), statusz.WithPageSize(2))
	root := httptest.NewServer(h)
	defer root.Close()
	mux := http.NewServeMux()
	mux.Handle("/debug/", http.StripPrefix("/debug", h))
	mux.Handle("/slash/", http.StripPrefix("/slash/", h))
	prefixed := httptest.NewServer(mux)
	defer prefixed.Close()

	for _, tc := range []struct{ name, page string }{
		{"root", root.URL + "/"},
		{"root, path //evil.example", root.URL + "//evil.example"},
		{"root, path ///evil.example", root.URL + "///evil.example"},
		{"root, path /\\evil.example", root.URL + "/%5Cevil.example"},
		{"StripPrefix", prefixed.URL + "/debug/rebound"},
		{"StripPrefix, path %2F%2Fevil.example", prefixed.URL + "/debug/%2F%2Fevil.example"},
		{"StripPrefix, path %2F%2Fevil.example, query", prefixed.URL + "/debug/%2F%2Fevil.example?state=stuck&page=2"},
		{"StripPrefix with a slash", prefixed.URL + "/slash/rebound"},
		{"StripPrefix with a slash, path %2F%2Fevil.example", prefixed.URL + "/slash/%2F%2Fevil.example"},
		{"StripPrefix with a slash, path %2Fevil.example", prefixed.URL + "/slash/%2Fevil.example"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pageURL, err := url.Parse(tc.page)
			if err != nil {
				t.Fatal(err)
			}
			body := fetch(t, pageURL)
			links := allLinks(body)
			if len(links) < 8 {
				t.Fatalf("%d links:\n%s", len(links), body)
			}
			for _, l := range links {
				if offSite.MatchString(l) || !strings.HasPrefix(l, "?") {
					t.Errorf("link %q: want a query on this page", l)
					continue
				}
				ref, err := url.Parse(l)
				if err != nil {
					t.Errorf("link %q: %v", l, err)
					continue
				}
				target := pageURL.ResolveReference(ref)
				if target.Host != pageURL.Host || target.EscapedPath() != pageURL.EscapedPath() {
					t.Errorf("link %q leads to %s, want %s", l, target, pageURL.EscapedPath())
					continue
				}
				want := "<h1>rebound status</h1>"
				if target.Query().Get("format") == "json" {
					want = `"managers": [`
				}
				if b := fetch(t, target); !strings.Contains(b, want) {
					t.Errorf("link %q (%s) does not serve the page:\n%s", l, target, b)
				}
			}
			// The filter form submits to the page itself (no action:
			// the document's address, with its query replaced).
			form := regexp.MustCompile(`<form[^>]*>`).FindString(body)
			if form != `<form method="get">` {
				t.Errorf("form %s", form)
			}
			submit := *pageURL
			submit.RawQuery = url.Values{"state": {"retrying"}, "q": {"retry"}}.Encode()
			if b := fetch(t, &submit); !strings.Contains(b, "2 matching") {
				t.Errorf("form submitted to %s:\n%s", &submit, b)
			}
		})
	}
}

func fetch(t *testing.T, u *url.URL) string {
	t.Helper()
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get(u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s\n%s", u, resp.Status, b)
	}
	return string(b)
}
