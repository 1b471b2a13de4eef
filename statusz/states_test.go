package statusz_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rebound-go/rebound/statusz"
	"github.com/rebound-go/rebound/subscriber"
)

// Every state of subscriber.States is counted in the summary and the
// JSON, can be filtered on, and (but subscribed) sorts before the
// subscribed ones. The page knew four states: a held subscription was
// missing from the summary, ?state=held was a 400, and it sorted among
// the subscribed ones.
func TestEveryStateIsShown(t *testing.T) {
	src := &fakeSubs{conn: "connected"}
	for i := range 150 {
		src.list = append(src.list, subscriber.Status{Key: key(fmt.Sprintf("ok-%03d", i)), State: subscriber.StateSubscribed, Since: t0})
	}
	for st := subscriber.StatePending; st <= subscriber.StateStopped; st++ {
		// One subscription per state, entered long ago (a stuck one
		// sorts first however long it has been in its state).
		src.list = append(src.list, subscriber.Status{Key: key("in-" + st.String()), State: st, Since: t0.Add(-100 * time.Hour)})
	}
	h := newHandler(t, statusz.WithSubscriptions("nacos", src))
	all := getJSON(t, h, "/?format=json").Managers[0]
	_, html := get(t, h, "/", "text/html")
	_, form := get(t, h, "/?state=stuck", "text/html")
	n := int(subscriber.StateStopped)
	for st := subscriber.StatePending; st <= subscriber.StateStopped; st++ {
		name := st.String()
		want := 1
		if st == subscriber.StateSubscribed {
			want = 151
		}
		if got, ok := all.Counts[name]; !ok || got != want {
			t.Errorf("JSON counts[%q] = %d (present %v), want %d", name, got, ok, want)
		}
		if c := fmt.Sprintf(`<b class="count-%s">%d</b>`, name, want); !strings.Contains(html, c) {
			t.Errorf("HTML summary lacks %s", c)
		}
		if o := fmt.Sprintf(`<option value="%s">%s</option>`, name, name); !strings.Contains(form, o) {
			t.Errorf("filter form lacks %s", o)
		}
		if resp, body := get(t, h, "/?state="+name, "text/html"); resp.StatusCode != http.StatusOK ||
			!strings.Contains(body, fmt.Sprintf("%d matching", want)) {
			t.Errorf("HTML ?state=%s: %d\n%s", name, resp.StatusCode, body)
		} else if p := getJSON(t, h, "/?format=json&state="+name).Managers[0]; p.Total != want || p.Subscriptions[0].State != name {
			t.Errorf("?state=%s: %d rows, first %+v", name, p.Total, p.Subscriptions[0])
		}
		if st == subscriber.StateSubscribed {
			continue
		}
		// Stuck first: the n-1 states that are not subscribed take the
		// first n-1 rows.
		i := strings.Index(keys(all.Subscriptions), "in-"+name)
		if i < 0 || i > strings.Index(keys(all.Subscriptions), "ok-000") {
			t.Errorf("%s sorts after the subscribed ones: %s", name, keys(all.Subscriptions[:n+1]))
		}
	}
	if stuck := getJSON(t, h, "/?format=json&state=stuck").Managers[0]; stuck.Total != n-1 {
		t.Errorf("stuck: %d, want %d (every state but subscribed)", stuck.Total, n-1)
	}
	if !strings.Contains(html, "stuck subscriptions first (retrying, held, pending, stopped;") {
		t.Errorf("the page does not say the order:\n%s", html)
	}
	if resp, body := get(t, h, "/?state=odd", ""); resp.StatusCode != http.StatusBadRequest ||
		!strings.Contains(body, "want one of retrying, held, pending, stopped, subscribed, or stuck") {
		t.Errorf("state=odd: %d %s", resp.StatusCode, body)
	}
}

// A held subscription: its hold in the JSON and on the page, and stuck
// ones first in a fixed order (retrying, held, pending, stopped).
func TestHeld(t *testing.T) {
	src := sample()
	src.list = append(src.list, subscriber.Status{Key: key("held"), State: subscriber.StateHeld, Since: t0.Add(-10 * time.Second),
		Instances: 2, HeldSince: t0.Add(-10 * time.Second), HeldUntil: t0.Add(50 * time.Second),
		HeldReason: "registry restarted, token=hunter2"})
	h := newHandler(t, statusz.WithSubscriptions("nacos", src))
	m := getJSON(t, h, "/?format=json").Managers[0]
	if ks := keys(m.Subscriptions); ks != "old-retry new-retry held pend gone a-ok b-ok" {
		t.Errorf("order: %s", ks)
	}
	s := m.Subscriptions[2]
	if s.State != "held" || !s.HeldSince.Equal(t0.Add(-10*time.Second)) || !s.HeldUntil.Equal(t0.Add(50*time.Second)) ||
		s.HeldReason != "registry restarted, token=[REDACTED]" || m.Counts["held"] != 1 {
		t.Errorf("held row %+v, counts %v", s, m.Counts)
	}
	_, body := get(t, h, "/?state=held", "text/html")
	for _, want := range []string{
		`<tr class="held"><td class="key">` + key("held").String(),
		`empty list held since 2026-12-01 07:59:50.000Z until 2026-12-01 08:00:50.000Z: registry restarted, token=[REDACTED]`,
		`<option value="held" selected>held</option>`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("HTML lacks %q:\n%s", want, body)
		}
	}
	if strings.Contains(body, "hunter2") {
		t.Error("the hold reason is not scrubbed")
	}
}
