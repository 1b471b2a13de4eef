package statusz_test

import (
	"strings"
	"testing"

	"github.com/rebound-go/rebound/statusz"
)

// The failback section showed neither the retries the throttle refused nor
// the stored calls set aside at load (WithQuarantine): an operator saw a
// healthy queue while records were quarantined.
func TestFailbackThrottledAndQuarantined(t *testing.T) {
	h := newHandler(t, statusz.WithFailback("notify", fakeStats{Queued: 1, Throttled: 7, Quarantined: 3}))
	p := getJSON(t, h, "/debug/rebound?format=json")
	if f := p.Failback[0]; f.Throttled != 7 || f.Quarantined != 3 {
		t.Errorf("JSON failback %+v: want throttled 7, quarantined 3", f)
	}
	_, body := get(t, h, "/debug/rebound", "text/html")
	for _, want := range []string{"<th>throttled</th>", "<th>quarantined</th>", `<td class="n">7</td>`, `<td class="n">3</td>`} {
		if !strings.Contains(body, want) {
			t.Errorf("HTML lacks %q", want)
		}
	}
}
