package statusz_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/failback"
	"github.com/rebound-go/rebound/statusz"
)

// Every drop sentinel shows under its label in JSON and HTML (this held).
func TestDroppedEveryReasonLabel(t *testing.T) {
	st := fakeStats{Dropped: map[error]uint64{
		failback.ErrQueueFull: 1, failback.ErrClosed: 2, failback.ErrExpired: 3,
		failback.ErrStore: 4, rebound.ErrBudgetExhausted: 5,
	}}
	log, err := statusz.NewEventLog(0)
	if err != nil {
		t.Fatal(err)
	}
	for r := range st.Dropped {
		log.Observe(rebound.Event{Kind: rebound.EventDropped, Detail: failback.Task{Reason: r}})
	}
	h := newHandler(t, statusz.WithFailback("notify", st), statusz.WithEvents("events", log))
	p := getJSON(t, h, "/debug/rebound?format=json")
	whats := map[string]bool{}
	for _, e := range p.Events[0].Events {
		whats[e.What] = true
	}
	for _, l := range []string{"queue_full", "closed", "expired", "store", "budget"} {
		if !whats["dropped: "+l] {
			t.Errorf("events lack %q: %v", "dropped: "+l, whats)
		}
	}
	want := map[string]uint64{"queue_full": 1, "closed": 2, "expired": 3, "store": 4, "budget": 5}
	for k, v := range want {
		if p.Failback[0].Dropped[k] != v {
			t.Errorf("JSON dropped[%q] = %d, want %d (%v)", k, p.Failback[0].Dropped[k], v, p.Failback[0].Dropped)
		}
	}
	_, body := get(t, h, "/debug/rebound", "text/html")
	for _, s := range []string{"queue_full: 1", "closed: 2", "expired: 3", "store: 4", "budget: 5"} {
		if !strings.Contains(body, s) {
			t.Errorf("HTML lacks %q", s)
		}
	}
}

// A Stats.Dropped key that wraps a drop sentinel (errors.Is matches
// ErrQueueFull, as the docs tell users to match reasons) shows as a second
// row under its error text, and its count is not in queue_full.
func TestDroppedWrappedSentinelMiscounted(t *testing.T) {
	wrapped := fmt.Errorf("shard b: %w", failback.ErrQueueFull)
	if !errors.Is(wrapped, failback.ErrQueueFull) {
		t.Fatal("setup")
	}
	st := fakeStats{Dropped: map[error]uint64{failback.ErrQueueFull: 1, wrapped: 2}}
	h := newHandler(t, statusz.WithFailback("notify", st))
	p := getJSON(t, h, "/debug/rebound?format=json")
	d := p.Failback[0].Dropped
	if d["queue_full"] != 3 || len(d) != 1 {
		t.Errorf("JSON dropped = %v; want queue_full: 3 (both keys match failback.ErrQueueFull)", d)
	}
}

// Two distinct reasons whose labels coincide (two errors with one text,
// or an unknown error whose text is a label) overwrite each other: the
// page shows one of the counts, chosen by map iteration order, never the sum.
func TestDroppedLabelCollisionLosesCounts(t *testing.T) {
	st := fakeStats{Dropped: map[error]uint64{
		failback.ErrQueueFull:     1,
		errors.New("queue_full"):  10,
		errors.New("boom"):        100,
		errors.New("boom") /*2*/ : 1000,
	}}
	h := newHandler(t, statusz.WithFailback("notify", st))
	var total uint64
	p := getJSON(t, h, "/debug/rebound?format=json")
	for _, n := range p.Failback[0].Dropped {
		total += n
	}
	if total != 1111 {
		t.Errorf("JSON dropped = %v: sum %d, want 1111 (sum of Stats.Dropped): counts overwritten", p.Failback[0].Dropped, total)
	}
}

// An unknown error as a drop reason is shown as its raw text: not passed
// through logging.Scrub, though docs/statusz.md says error texts are.
// Same in the events log's "what" ("dropped: <text>").
func TestDroppedUnknownReasonNotScrubbed(t *testing.T) {
	secret := errors.New("dial postgres://app:hunter2@db:5432/x failed")
	st := fakeStats{Dropped: map[error]uint64{secret: 1}}
	log, err := statusz.NewEventLog(0)
	if err != nil {
		t.Fatal(err)
	}
	log.Observe(rebound.Event{Kind: rebound.EventDropped,
		Detail: failback.Task{Invocation: nil, Reason: secret}})
	h := newHandler(t, statusz.WithFailback("notify", st), statusz.WithEvents("events", log))
	_, body := get(t, h, "/debug/rebound?format=json", "")
	if strings.Contains(body, "hunter2") {
		i := strings.Index(body, "hunter2")
		t.Errorf("JSON shows the password of an unknown drop reason unscrubbed: ...%s...", body[max(0, i-40):i+20])
	}
	_, html := get(t, h, "/debug/rebound", "text/html")
	if strings.Contains(html, "hunter2") {
		t.Errorf("HTML shows the password of an unknown drop reason unscrubbed")
	}
}
