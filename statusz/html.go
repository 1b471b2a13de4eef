package statusz

import (
	"html/template"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/rebound-go/rebound/subscriber"
)

type htmlData struct {
	jsonPage
	q query
}

// Link returns a link to this page with the query changed: state and page
// set, q, limit and refresh kept. It is a query-only relative reference
// ("?state=retrying&page=2", or "?" for no parameter), resolved against
// the page's own address: never built from the request's path, which a
// client chooses (at a server's root, "//evil.example" would make a link
// to another site).
func (d htmlData) Link(state string, page int) string {
	v := d.values()
	if state != "" {
		v.Set("state", state)
	}
	if page > 1 {
		v.Set("page", strconv.Itoa(page))
	}
	if d.q.refresh > 0 {
		v.Set("refresh", strconv.Itoa(d.q.refresh))
	}
	return "?" + v.Encode()
}

// JSONLink is the same view as JSON: state, q and, if given, limit and
// page.
func (d htmlData) JSONLink() string {
	v := d.values()
	v.Set("format", "json")
	if d.q.state != "" {
		v.Set("state", d.q.state)
	}
	if d.q.limitSet && d.q.page > 1 {
		v.Set("page", strconv.Itoa(d.q.page))
	}
	return "?" + v.Encode()
}

// values holds the parameters every link keeps: q and limit.
func (d htmlData) values() url.Values {
	v := url.Values{}
	if d.q.q != "" {
		v.Set("q", d.q.q)
	}
	if d.q.limitSet {
		v.Set("limit", strconv.Itoa(d.q.limit))
	}
	return v
}

func (d htmlData) State() string { return d.q.state }
func (d htmlData) Refresh() int  { return d.q.refresh }
func (d htmlData) Query() string { return d.q.q }

// Limit is the limit parameter, "" if not given (the filter form keeps
// it).
func (d htmlData) Limit() string {
	if !d.q.limitSet {
		return ""
	}
	return strconv.Itoa(d.q.limit)
}

// Stuck names the states shown before subscribed, in order.
func (d htmlData) Stuck() string {
	var names []string
	for _, s := range states {
		if s != subscriber.StateSubscribed {
			names = append(names, s.String())
		}
	}
	return strings.Join(names, ", ")
}

var funcs = template.FuncMap{
	"age": func(d time.Duration) string {
		switch {
		case d <= 0:
			return ""
		case d < time.Second:
			return d.Round(time.Millisecond).String()
		case d < time.Hour:
			return d.Round(time.Second).String()
		}
		return d.Round(time.Minute).String()
	},
	"ts": func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.UTC().Format("2006-01-02 15:04:05.000Z")
	},
	"since": func(now, t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return now.Sub(t).Round(time.Second).String() + " ago"
	},
	"add": func(a, b int) int { return a + b },
	// given reports whether a failback section has a breaker source (an
	// empty list is one with no open breaker).
	"given": func(rows []breakerRow) bool { return rows != nil },
	"breakers": func(now time.Time, rows []breakerRow) breakerTable {
		return breakerTable{now, rows}
	},
	"states": stateNames,
}

var page = template.Must(template.New("page").Funcs(funcs).Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
{{if .Refresh}}<meta http-equiv="refresh" content="{{.Refresh}}">{{end}}
<title>rebound status</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#1b1f24;background:#fff}
h1{font-size:1.4em;margin:0 0 .2em}h2{font-size:1.15em;margin:1.4em 0 .4em}
.muted{color:#57606a}table{border-collapse:collapse;width:100%;margin:.4em 0}
th,td{border-bottom:1px solid #d0d7de;padding:.25em .5em;text-align:left;vertical-align:top}
th{background:#f6f8fa;position:sticky;top:0}td.n{text-align:right;font-variant-numeric:tabular-nums}
tr.retrying,tr.open{background:#ffebe9}tr.half-open{background:#fff8c5}h3{font-size:1em;margin:.8em 0 .2em}tr.held{background:#fbefff}tr.pending{background:#fff8c5}tr.stopped{background:#eaeef2;color:#57606a}
.badge{display:inline-block;padding:.05em .6em;border-radius:1em;font-weight:600}
.connected{background:#dafbe1;color:#116329}.disconnected{background:#ffebe9;color:#a40e26}.unknown{background:#eaeef2}
.err{font-family:ui-monospace,monospace;font-size:.9em;word-break:break-word;max-width:40em}
.key{font-family:ui-monospace,monospace;white-space:nowrap}nav a,nav b{margin-right:.6em}form{margin:.6em 0}
</style></head><body>
<h1>rebound status</h1>
<p class="muted">Generated {{ts .Generated}} · <a href="{{.JSONLink}}">JSON</a> · stuck subscriptions first ({{.Stuck}}; longest first)</p>
<form method="get">{{with .Limit}}<input type="hidden" name="limit" value="{{.}}">{{end}}
<label>state <select name="state"><option value="">all</option>
<option value="stuck"{{if eq .State "stuck"}} selected{{end}}>stuck (not subscribed)</option>
{{range states}}<option value="{{.}}"{{if eq $.State .}} selected{{end}}>{{.}}</option>{{end}}
</select></label>
<label>key contains <input name="q" value="{{.Query}}" size="24"></label>
<label>reload every <input name="refresh" value="{{if .Refresh}}{{.Refresh}}{{end}}" size="3"> s</label>
<button type="submit">filter</button></form>
{{range $m := .Managers}}
<section class="manager" data-name="{{$m.Name}}">
<h2>Subscriptions: {{$m.Name}}</h2>
<p>Registry:
{{if $m.Registry}}<span class="badge {{$m.Registry}}" id="registry-{{$m.Name}}">{{$m.Registry}}</span>
{{else}}<span class="badge unknown">not reported</span>{{end}}</p>
<p class="counts">{{range states}}<a href="{{$.Link . 1}}">{{.}}: <b class="count-{{.}}">{{index $m.Counts .}}</b></a> · {{end}}<a href="{{$.Link "" 1}}">all</a></p>
<p class="muted">{{$m.Total}} matching{{if gt $m.Pages 1}}, page {{$m.Page}} of {{$m.Pages}}{{end}}</p>
{{if gt $m.Pages 1}}<nav>{{if gt $m.Page 1}}<a href="{{$.Link $.State (add $m.Page -1)}}">« previous</a>{{end}}{{if lt $m.Page $m.Pages}}<a href="{{$.Link $.State (add $m.Page 1)}}">next »</a>{{end}}</nav>{{end}}
<table class="subs"><thead><tr><th>key</th><th>state</th><th>for</th><th>attempts</th><th>last error</th><th>instances</th><th>deliveries</th><th>last delivery</th><th>confirmed</th></tr></thead><tbody>
{{range $m.Subscriptions}}<tr class="{{.State}}"><td class="key">{{.Key}}</td><td>{{.State}}</td><td title="since {{ts .Since}}">{{age .Age}}</td><td class="n">{{.Attempts}} <span class="muted">/ {{.TotalAttempts}}</span></td><td class="err">{{.LastError}}{{if not .HeldUntil.IsZero}}<span class="held">empty list held since {{ts .HeldSince}} until {{ts .HeldUntil}}{{with .HeldReason}}: {{.}}{{end}}</span>{{end}}</td><td class="n">{{.Instances}}</td><td class="n">{{.Deliveries}}</td><td>{{since $.Generated .LastDelivery}}</td><td>{{if .ConfirmReason}}{{.ConfirmReason}} <span class="muted">{{since $.Generated .ConfirmedAt}}</span>{{end}}</td></tr>
{{else}}<tr><td colspan="9" class="muted">no subscription matches</td></tr>{{end}}
</tbody></table>
</section>
{{end}}
{{range $r := .Registrations}}
<section class="registrations" data-name="{{$r.Name}}">
<h2>Registrations: {{$r.Name}}</h2>
<p class="counts">{{range $s, $n := $r.Counts}}{{$s}}: <b class="count-{{$s}}">{{$n}}</b> · {{end}}</p>
<table class="regs"><thead><tr><th>key</th><th>instance</th><th>registry</th><th>state</th><th>for</th><th>registrations</th><th>repairs</th><th>attempts</th><th>last error</th></tr></thead><tbody>
{{range $r.Registrations}}<tr class="{{if eq .State "registered"}}registered{{else if eq .State "stopped"}}stopped{{else}}retrying{{end}}"><td class="key">{{.Key}}</td><td class="key">{{.Instance}}</td><td>{{.Registry}}</td><td>{{.State}}</td><td title="since {{ts .Since}}">{{age .Age}}</td><td class="n">{{.Registrations}}</td><td class="n">{{.Repairs}}</td><td class="n">{{.Attempts}}</td><td class="err">{{.LastError}}{{if .LastError}} <span class="muted">{{since $.Generated .LastErrorAt}}</span>{{end}}</td></tr>
{{else}}<tr><td colspan="9" class="muted">no registration</td></tr>{{end}}
</tbody></table>
</section>
{{end}}
{{range .Failback}}
<section class="failback" data-name="{{.Name}}">
<h2>Failback queue: {{.Name}}</h2>
<table class="fb"><thead><tr><th>queued</th><th>in flight</th><th>offered</th><th>retried</th><th>succeeded</th><th>gave up</th><th>throttled</th><th>quarantined</th><th>dropped</th><th title="retries that waited for a circuit breaker instead of being attempted">breaker waits</th></tr></thead><tbody>
<tr><td class="n">{{.Queued}}</td><td class="n">{{.InFlight}}</td><td class="n">{{.Offered}}</td><td class="n">{{.Retried}}</td><td class="n">{{.Succeeded}}</td><td class="n">{{.GaveUp}}</td><td class="n">{{.Throttled}}</td><td class="n">{{.Quarantined}}</td><td>{{$any := false}}{{range $r, $n := .Dropped}}{{if $n}}{{$any = true}}{{$r}}: {{$n}} {{end}}{{end}}{{if not $any}}0{{end}}</td><td class="n breaker-waits">{{.BreakerWaits}}</td></tr>
</tbody></table>
{{if given .Breakers}}{{template "breakers" (breakers $.Generated .Breakers)}}{{end}}
</section>
{{end}}
{{range .Breakers}}
<section class="breakers" data-name="{{.Name}}">
<h2>Circuit breakers: {{.Name}}</h2>
{{template "breakers" (breakers $.Generated .Breakers)}}
</section>
{{end}}
{{range .Events}}
<section class="events" data-name="{{.Name}}">
<h2>Recent events: {{.Name}}</h2>
<p class="muted">{{len .Events}} kept of {{.Observed}} observed, newest first</p>
<table class="events"><thead><tr><th>at</th><th>kind</th><th>about</th><th>what</th><th>error</th></tr></thead><tbody>
{{range .Events}}<tr class="{{.Kind}}"><td>{{ts .At}}</td><td>{{.Kind}}</td><td class="key">{{.Subject}}</td><td>{{.What}}</td><td class="err">{{.Error}}</td></tr>
{{else}}<tr><td colspan="5" class="muted">no event yet</td></tr>{{end}}
</tbody></table>
</section>
{{end}}
{{if and (not .Managers) (not .Failback) (not .Registrations) (not .Breakers) (not .Events)}}<p class="muted">Nothing to show: the handler was created without sources.</p>{{end}}
</body></html>
`))

// breakersTmpl is the table of a breaker source's open breakers.
var _ = template.Must(page.New("breakers").Parse(`<h3>Open circuit breakers ({{len .Rows}})</h3>
<table class="breakers"><thead><tr><th>target</th><th>state</th><th>since</th><th>for</th><th>next probe</th><th>selection</th></tr></thead><tbody>
{{range .Rows}}<tr class="{{if .Open}}open{{else}}half-open{{end}}"><td class="key">{{.Target}}</td><td>{{.State}}</td><td>{{ts .Since}}</td><td>{{age .Age}}</td><td>{{if .Open}}{{ts .Until}}{{with .ProbeIn}} <span class="muted">in {{age .}}</span>{{else}} <span class="muted">due</span>{{end}}{{else}}<span class="muted">probing</span>{{end}}</td><td>{{if .Ejected}}ejected{{else if .Open}}<span class="over">over the share, still called</span>{{else}}listed for a probe{{end}}</td></tr>
{{else}}<tr><td colspan="6" class="muted">no open breaker</td></tr>{{end}}
</tbody></table>
`))

type breakerTable struct {
	Generated time.Time
	Rows      []breakerRow
}
