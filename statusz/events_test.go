package statusz_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/cluster"
	"github.com/rebound-go/rebound/failback"
	"github.com/rebound-go/rebound/statusz"
	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/subscribertest"
)

// The status page is an observer of the same events as metrics and logs:
// one EventLog given to a real Manager and a real failback Invoker shows
// their events, newest first, in HTML and JSON, errors scrubbed.
func TestEventLogObservesManagerAndFailback(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log, err := statusz.NewEventLog(0)
		if err != nil {
			t.Fatal(err)
		}
		reg := subscribertest.New()
		orders := subscriber.Key{Service: "orders"}
		reg.Set(orders, subscribertest.Instance("10.0.0.1", 80))
		m, err := subscriber.New(reg, subscriber.WithPolicy(rebound.Policy{}, rebound.WithObserver(log)))
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		if _, err := m.Subscribe(t.Context(), orders, func([]subscriber.Instance) {}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()

		fb, err := failback.New(cluster.NewStaticDirectory(failing{}), failback.WithMaxTasks(1),
			failback.WithPolicy(rebound.Policy{Initial: time.Second, Max: time.Second, Jitter: rebound.NoJitter}, rebound.WithMaxAttempts(2), rebound.WithObserver(log)))
		if err != nil {
			t.Fatal(err)
		}
		defer fb.Close()
		ctx := context.Background()
		_, _ = fb.Invoke(ctx, &cluster.Invocation{Method: "Notify"}) // queued
		_, _ = fb.Invoke(ctx, &cluster.Invocation{Method: "Notify"}) // the queue is full: dropped
		time.Sleep(5 * time.Second)                                  // the queued one gives up after its retry
		synctest.Wait()

		h := newHandler(t, statusz.WithEvents("events", log))
		pg := getJSON(t, h, "/?format=json")
		if len(pg.Events) != 1 || pg.Events[0].Name != "events" {
			t.Fatalf("events sections %+v", pg.Events)
		}
		rows := pg.Events[0].Events
		var kinds []string
		for i := len(rows) - 1; i >= 0; i-- { // oldest first
			kinds = append(kinds, rows[i].Kind+" "+rows[i].Subject+" "+rows[i].What)
		}
		got := strings.Join(kinds, "\n")
		for _, want := range []string{
			"state-changed orders State(0) -> pending",
			"state-changed orders pending -> subscribed",
			"delivered orders delivered, 1 instances",
			"confirmed orders subscribe",
			"queued Notify @ 10.0.0.7:20880 attempt 1, next in 1s",
			"dropped Notify @ 10.0.0.7:20880 dropped: queue_full",
			"give-up Notify @ 10.0.0.7:20880",
		} {
			if !strings.Contains(got, want) {
				t.Errorf("events lack %q; got:\n%s", want, got)
			}
		}
		if pg.Events[0].Observed != uint64(len(rows)) {
			t.Errorf("observed %d, kept %d (the log is not full)", pg.Events[0].Observed, len(rows))
		}
		for _, r := range rows {
			if strings.Contains(r.Error, "hunter2") {
				t.Fatalf("a password reached the page: %+v", r)
			}
		}
		_, html := get(t, h, "/", "text/html")
		if !strings.Contains(html, "Recent events: events") || !strings.Contains(html, "pending -&gt; subscribed") {
			t.Fatalf("the HTML page has no events section:\n%s", html)
		}
	})
}

// failing refuses every call with a transient error holding a password.
type failing struct{}

func (failing) Target() string { return "10.0.0.7:20880" }
func (failing) Invoke(context.Context, *cluster.Invocation) (any, error) {
	return nil, rebound.Transient(errors.New("connection refused, password=hunter2"))
}

// An EventLog keeps the last size events, newest first, and counts all.
func TestEventLogRing(t *testing.T) {
	log, _ := statusz.NewEventLog(3)
	for i := 1; i <= 5; i++ {
		log.Observe(rebound.Event{Kind: rebound.EventRetry, Attempt: i, Delay: time.Second})
	}
	rows, n := log.Events()
	if n != 5 || len(rows) != 3 || rows[0].What != "attempt 5, next in 1s" || rows[2].What != "attempt 3, next in 1s" {
		t.Fatalf("rows %+v, total %d; want attempts 5, 4, 3 of 5", rows, n)
	}
	if _, err := statusz.NewEventLog(-1); !errors.Is(err, rebound.ErrInvalidArgument) || !strings.Contains(err.Error(), "statusz.NewEventLog: size must not be negative") {
		t.Fatalf("NewEventLog(-1) = %v", err)
	}
	if _, err := statusz.New(statusz.WithEvents("x", nil)); !errors.Is(err, rebound.ErrInvalidArgument) || !strings.Contains(err.Error(), "log must not be nil") {
		t.Fatalf("WithEvents(nil) = %v", err)
	}
}

// A large size is a bound, not an allocation: NewEventLog(math.MaxInt)
// panicked (makeslice: cap out of range), and a size of a few million
// took its memory at once for events that may never come.
func TestEventLogHugeSize(t *testing.T) {
	for _, size := range []int{math.MaxInt, math.MaxInt32} {
		l, err := statusz.NewEventLog(size)
		if err != nil {
			t.Fatalf("NewEventLog(%d): %v", size, err)
		}
		for i := 1; i <= 3; i++ {
			l.Observe(rebound.Event{Kind: rebound.EventRetry, Attempt: i, Delay: time.Second})
		}
		if rows, n := l.Events(); n != 3 || len(rows) != 3 || rows[0].What != "attempt 3, next in 1s" || rows[2].What != "attempt 1, next in 1s" {
			t.Fatalf("NewEventLog(%d): rows %+v, total %d", size, rows, n)
		}
	}
}

// Registry data and error texts reach the "Recent events" rows escaped:
// in HTML no markup of theirs survives, in JSON they round-trip.
func TestEventLogEscapesInjection(t *testing.T) {
	const evil = `<script>alert(1)</script><img src=x onerror=alert(2)>"'&`
	l, _ := statusz.NewEventLog(0)
	key := subscriber.Key{Service: evil, Group: evil}
	l.Observe(rebound.Event{Kind: rebound.EventStateChanged, Err: errors.New(evil),
		Detail: subscriber.SubscriptionEvent{Key: key, From: subscriber.StatePending, To: subscriber.StateRetrying}})
	l.Observe(rebound.Event{Kind: rebound.EventConfirmed, Detail: subscriber.SubscriptionEvent{Key: key, Reason: evil}})
	h, err := statusz.New(statusz.WithEvents(evil, l))
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"/", "/?format=json"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, q, nil))
		body := rec.Body.String()
		if rec.Code != http.StatusOK {
			t.Fatalf("%s: %d %s", q, rec.Code, body)
		}
		for _, raw := range []string{"<script>", "<img", "onerror=alert(2)>"} {
			if strings.Contains(body, raw) {
				t.Errorf("%s: the page contains %q unescaped", q, raw)
			}
		}
		if q != "/" {
			var v any
			if err := json.Unmarshal(rec.Body.Bytes(), &v); err != nil {
				t.Fatalf("JSON: %v", err)
			}
			if !strings.Contains(fmt.Sprint(v), evil) {
				t.Errorf("JSON does not carry the text back: %s", body)
			}
		}
	}
}
