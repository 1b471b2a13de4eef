package statusz

import (
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/cluster"
	"github.com/rebound-go/rebound/failback"
	"github.com/rebound-go/rebound/logging"
	"github.com/rebound-go/rebound/subscriber"
)

// defaultEventLogSize is the number of events an EventLog keeps, unless
// the tests set another size.
const defaultEventLogSize = 100

// EventLog is a rebound.Observer that keeps the last 100 events, for
// WithEvents; one may observe several components. The zero EventLog is
// ready to use; it is safe for concurrent use.
type EventLog struct {
	now  func() time.Time
	size int // the most rows kept
	mu   sync.Mutex
	rows []eventRow // a ring of len size once full (grown as events come)
	next int
	n    uint64 // events observed
}

// eventRow is one observed event, as the page shows it.
type eventRow struct {
	At   time.Time `json:"at"`
	Kind string    `json:"kind"`
	// Subject is what the event is about: a subscription's or a
	// registration's key, a failback call's method and target, a breaker's
	// target; empty for a retry loop's own events.
	Subject string `json:"subject,omitempty"`
	// What says what happened, in a few words ("pending -> subscribed",
	// "attempt 3, next in 2s", "dropped: queue_full").
	What  string `json:"what,omitempty"`
	Error string `json:"error,omitempty"`
}

// Observe records e.
func (l *EventLog) Observe(e rebound.Event) {
	at := time.Now()
	if l.now != nil {
		at = l.now()
	}
	r := eventRow{At: at, Kind: e.Kind.String()}
	describe(&r, e)
	if e.Err != nil {
		r.Error = logging.Scrub(e.Err.Error())
	}
	l.mu.Lock()
	size := l.size
	if size == 0 {
		size = defaultEventLogSize
	}
	if len(l.rows) < size {
		l.rows = append(l.rows, r)
	} else {
		l.rows[l.next] = r
	}
	l.next = (l.next + 1) % size
	l.n++
	l.mu.Unlock()
}

// snapshot returns the events kept, newest first, and how many were
// observed in all.
func (l *EventLog) snapshot() (rows []eventRow, total uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	rows = make([]eventRow, 0, len(l.rows))
	for i := range len(l.rows) {
		rows = append(rows, l.rows[(l.next-1-i+len(l.rows))%len(l.rows)])
	}
	return rows, l.n
}

// describe fills r's Subject and What from e and its Detail. Subjects are
// registry data: they pass through logging.Scrub.
func describe(r *eventRow, e rebound.Event) {
	switch d := e.Detail.(type) {
	case subscriber.SubscriptionEvent:
		r.Subject = d.Key.String()
		switch e.Kind {
		case rebound.EventStateChanged:
			r.What = transition(d.From.String(), d.To.String())
		case rebound.EventDelivered:
			r.What = d.Result + ", " + strconv.Itoa(d.Instances) + " instances"
		case rebound.EventConfirmed:
			r.What = d.Reason
		case rebound.EventThrottled:
			r.What = "deferred " + e.Delay.String()
		default: // an attempt, and the retry or give-up after a failed one
			r.What = "attempt " + strconv.Itoa(e.Attempt)
			if e.Kind == rebound.EventRetry {
				r.What += ", next in " + e.Delay.String()
			}
		}
	case subscriber.ConnectionChange:
		r.Subject, r.What = "registry", fmt.Sprintf("%s, %d subscriptions", connWord(d.Connected), d.Subscriptions)
	case subscriber.RegistrationEvent:
		r.Subject, r.What = d.Registry+" "+d.Key.String(), d.Op+" in "+d.Duration.String()
		if e.Kind == rebound.EventStateChanged {
			r.What = transition(d.From.String(), d.To.String())
		}
	case failback.Task:
		if d.Invocation != nil {
			r.Subject = d.Invocation.Method
		}
		if d.Target != "" {
			r.Subject += " @ " + d.Target
		}
		switch {
		case e.Kind == rebound.EventDropped:
			r.What = "dropped: " + dropLabel(d.Reason)
		case d.Delay > 0:
			r.What = fmt.Sprintf("attempt %d, next in %v", d.Attempts, d.Delay)
		default:
			r.What = fmt.Sprintf("attempt %d, after %v", d.Attempts, d.Age.Round(time.Millisecond))
		}
	case cluster.BreakerEvent:
		r.Subject, r.What = d.Target, transition(d.From.String(), d.To.String())
	case nil:
		switch {
		case e.Delay > 0:
			r.What = fmt.Sprintf("attempt %d, next in %v", e.Attempt, e.Delay)
		case e.Attempt > 0:
			r.What = "attempt " + strconv.Itoa(e.Attempt)
		}
	default:
		r.What = fmt.Sprintf("%T", d)
	}
	r.Subject = logging.Scrub(r.Subject)
}

func transition(from, to string) string { return from + " -> " + to }

// dropLabel names the reason of a failback drop as the page shows it: the
// sentinel it matches (errors.Is, so a wrapped one too), or else its text,
// scrubbed like every error text.
func dropLabel(reason error) string {
	for _, l := range dropLabels {
		if errors.Is(reason, l.err) {
			return l.label
		}
	}
	if reason == nil {
		return "unknown"
	}
	return logging.Scrub(reason.Error())
}

var dropLabels = [...]struct {
	err   error
	label string
}{
	{failback.ErrQueueFull, "queue_full"},
	{failback.ErrClosed, "closed"},
	{failback.ErrExpired, "expired"},
	{failback.ErrStore, "store"},
	{rebound.ErrBudgetExhausted, "budget"},
}

// connWord names a connection report as the page shows it.
func connWord(up bool) string {
	if up {
		return "connected"
	}
	return "disconnected"
}
