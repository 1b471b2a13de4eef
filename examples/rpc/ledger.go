package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"slices"
	"strings"
	"sync"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/cluster"
	"github.com/rebound-go/rebound/failback"
)

// outcome is what the consumer knows of one notification.
type outcome uint8

const (
	outNone          outcome = iota // not sent, or sent with no outcome yet
	outQueued                       // handed to failback; no final outcome yet
	outFirst                        // delivered on the first attempt
	outRetried                      // delivered after retry (EventRecovered)
	outGaveUpRetries                // EventGiveUp: every retry failed
	outGaveUpOther                  // EventGiveUp: not retryable on a retry, or the policy's limit
	outQueueFull                    // EventDropped (ErrQueueFull); Invoke returned ErrQueueFull
	outClosed                       // EventDropped (ErrClosed): closed at shutdown
	outNonRetryable                 // Invoke returned a non-retryable error (HTTP 4xx)
	outOther                        // Invoke returned another error (the run was interrupted)
	numOutcomes
)

// final reports whether o ends a notification's story.
func (o outcome) final() bool { return o >= outFirst }

// delivered reports whether o means the consumer believes a provider got it.
func (o outcome) delivered() bool { return o == outFirst || o == outRetried }

// ledger is the consumer's account of every notification, kept from
// failback's hooks and Invoke's results: each sent ID ends in exactly one
// final outcome. Safe for concurrent use.
type ledger struct {
	mu        sync.Mutex
	state     []outcome // by notification ID (1..n)
	sent      []bool
	conflicts []string // an ID given two different final outcomes
	example   [numOutcomes]string

	// Hook counters, compared with failback.Stats at the end.
	hQueued, hRetried, hSucceeded, hGaveUp uint64
	hDropped                               map[error]uint64

	// Retry-After: waits that followed an answer carrying one.
	retryAfterOK, retryAfterShort int
	maxAttempts                   int
}

func newLedger(n int) *ledger {
	return &ledger{
		state:    make([]outcome, n+1),
		sent:     make([]bool, n+1),
		hDropped: map[error]uint64{},
	}
}

// idOf returns the notification ID of an invocation made by the run.
func idOf(inv *cluster.Invocation) int {
	if inv != nil && len(inv.Args) == 1 {
		if n, ok := inv.Args[0].(Notification); ok {
			return n.ID
		}
	}
	return 0
}

// markSent records that id is about to be invoked.
func (l *ledger) markSent(id int) {
	l.mu.Lock()
	l.sent[id] = true
	l.mu.Unlock()
}

// settleLocked gives id its final outcome o. A different final outcome
// already given is a conflict (a bug in the accounting or in failback).
func (l *ledger) settleLocked(id int, o outcome, err error) {
	if id <= 0 || id >= len(l.state) {
		l.conflicts = append(l.conflicts, fmt.Sprintf("outcome %d for unknown ID %d", o, id))
		return
	}
	if prev := l.state[id]; prev.final() && prev != o {
		l.conflicts = append(l.conflicts, fmt.Sprintf("ID %d: %s, then %s", id, outcomeNames[prev], outcomeNames[o]))
		return
	}
	l.state[id] = o
	if err != nil && l.example[o] == "" {
		l.example[o] = briefError(err)
	}
}

// invoked records what Invoke returned for id.
func (l *ledger) invoked(id int, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case err == nil:
		// Delivered on the first attempt, unless the Queued hook, which
		// failback calls from this goroutine before Invoke returns, says
		// it was queued (the task may even have finished already).
		if l.state[id] == outNone {
			l.settleLocked(id, outFirst, nil)
		}
	case errors.Is(err, failback.ErrQueueFull):
		// EventDropped has said so too, from this goroutine.
		l.settleLocked(id, outQueueFull, err)
	case err != failback.ErrClosed && (errors.Is(err, failback.ErrClosed) || errors.Is(err, failback.ErrExpired) || errors.Is(err, failback.ErrStore)):
		// Not queued (an unqueued call wraps the reason and its error).
		l.settleLocked(id, outClosed, err)
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		l.settleLocked(id, outOther, err)
	default:
		l.settleLocked(id, outNonRetryable, err)
	}
}

func dropOutcome(r error) outcome {
	if r == failback.ErrQueueFull {
		return outQueueFull
	}
	return outClosed
}

// hooks returns the failback observer that feeds the ledger.
func (l *ledger) hooks() rebound.Observer { return rebound.ObserverFunc(l.observe) }

func (l *ledger) observe(e rebound.Event) {
	t, ok := e.Detail.(failback.Task)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch e.Kind {
	case rebound.EventQueued:
		l.hQueued++
		if id := idOf(t.Invocation); id > 0 && id < len(l.state) && l.state[id] == outNone {
			l.state[id] = outQueued
		}
		l.checkRetryAfterLocked(t)
	case rebound.EventRetry:
		l.hRetried++
		l.checkRetryAfterLocked(t)
	case rebound.EventRecovered:
		l.hSucceeded++
		l.maxAttempts = max(l.maxAttempts, t.Attempts)
		l.settleLocked(idOf(t.Invocation), outRetried, nil)
	case rebound.EventGiveUp:
		l.hGaveUp++
		o := outGaveUpOther
		if errors.Is(t.Err, rebound.ErrExhausted) {
			o = outGaveUpRetries
		}
		l.settleLocked(idOf(t.Invocation), o, t.Err)
	case rebound.EventDropped:
		l.hDropped[t.Reason]++
		l.settleLocked(idOf(t.Invocation), dropOutcome(t.Reason), t.Err)
	}
}

// checkRetryAfterLocked checks that a wait scheduled after an answer with
// a Retry-After is at least that long.
func (l *ledger) checkRetryAfterLocked(t failback.Task) {
	if d, ok := rebound.RetryAfterDelay(t.Err); ok {
		if t.Delay >= d {
			l.retryAfterOK++
		} else {
			l.retryAfterShort++
		}
	}
}

// progress is a live snapshot for the progress line.
type progress struct {
	sent, first, retried, dropped, waiting int
}

func (l *ledger) progress() progress {
	l.mu.Lock()
	defer l.mu.Unlock()
	var p progress
	for id, s := range l.sent {
		if !s {
			continue
		}
		switch o := l.state[id]; {
		case o == outFirst:
			p.first++
		case o == outRetried:
			p.retried++
		case o.final():
			p.dropped++
		default:
			p.waiting++
		}
		p.sent++
	}
	return p
}

var outcomeNames = [numOutcomes]string{
	outNone:          "no outcome",
	outQueued:        "still queued",
	outFirst:         "delivered on the first attempt",
	outRetried:       "delivered after retry",
	outGaveUpRetries: "dropped: gave up after %d retries",
	outGaveUpOther:   "dropped: gave up (not retryable on retry, or policy limit)",
	outQueueFull:     "dropped: retry queue full",
	outClosed:        "dropped: closed at shutdown",
	outNonRetryable:  "dropped: not retryable (HTTP 4xx)",
	outOther:         "dropped: other error (run interrupted)",
}

// droppedOutcomes are the final outcomes that report a notification as
// not delivered, in the order they are printed.
var droppedOutcomes = []outcome{outNonRetryable, outGaveUpRetries, outGaveUpOther, outQueueFull, outClosed, outOther}

// report is the end-of-run accounting: the consumer's ledger checked against
// failback's Stats and against what the providers recorded.
type report struct {
	retries int

	sent      int
	counts    [numOutcomes]int
	noOutcome []int // sent, with no final outcome: silently lost
	conflicts []string
	example   [numOutcomes]string

	hooks struct {
		queued, retried, succeeded, gaveUp uint64
		dropped                            map[error]uint64
	}
	stats failback.Stats

	retryAfterOK, retryAfterShort int

	// Provider side.
	requests             int   // accepted requests, duplicates included
	distinct             int   // distinct IDs accepted
	duplicates           []int // IDs accepted more than once
	deliveredNotReceived []int // delivered per the consumer, no provider has it: silently lost
	missing              []int // sent, not accepted by any provider
	missingReported      []int // missing, and reported dropped
	receivedDespiteDrop  []int // reported dropped, yet a provider accepted it
	notSent              []int // accepted by a provider, never sent (impossible)
}

// buildReport compares the ledger with failback's final Stats and the
// providers' receipts. Call it after failback's Close has returned and the
// providers have stopped.
func (l *ledger) buildReport(retries int, st failback.Stats, rec map[int][]string) *report {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := &report{retries: retries, stats: st, conflicts: slices.Clone(l.conflicts), example: l.example,
		retryAfterOK: l.retryAfterOK, retryAfterShort: l.retryAfterShort}
	r.hooks.queued, r.hooks.retried, r.hooks.succeeded, r.hooks.gaveUp = l.hQueued, l.hRetried, l.hSucceeded, l.hGaveUp
	r.hooks.dropped = map[error]uint64{}
	for k, v := range l.hDropped {
		r.hooks.dropped[k] = v
	}
	for id := 1; id < len(l.state); id++ {
		if !l.sent[id] {
			if len(rec[id]) > 0 {
				r.notSent = append(r.notSent, id)
			}
			continue
		}
		r.sent++
		o := l.state[id]
		r.counts[o]++
		if !o.final() {
			r.noOutcome = append(r.noOutcome, id)
		}
		got := rec[id]
		r.requests += len(got)
		if len(got) > 0 {
			r.distinct++
		}
		if len(got) > 1 {
			r.duplicates = append(r.duplicates, id)
		}
		switch {
		case len(got) == 0:
			r.missing = append(r.missing, id)
			if o.delivered() {
				r.deliveredNotReceived = append(r.deliveredNotReceived, id)
			} else if o.final() {
				r.missingReported = append(r.missingReported, id)
			}
		case o.final() && !o.delivered():
			r.receivedDespiteDrop = append(r.receivedDespiteDrop, id)
		}
	}
	return r
}

func (r *report) delivered() int { return r.counts[outFirst] + r.counts[outRetried] }

func (r *report) dropped() int {
	n := 0
	for _, o := range droppedOutcomes {
		n += r.counts[o]
	}
	return n
}

// silentlyLost lists the notifications neither delivered nor reported:
// sent with no final outcome, or reported delivered while no provider got
// them.
func (r *report) silentlyLost() []int {
	lost := slices.Concat(r.noOutcome, r.deliveredNotReceived)
	slices.Sort(lost)
	return lost
}

// identityHolds: sent = delivered + reported dropped, every delivery is
// confirmed by a provider, every missing ID was reported, and no ID has
// two outcomes.
func (r *report) identityHolds() bool {
	return r.sent == r.delivered()+r.dropped() && len(r.silentlyLost()) == 0 &&
		len(r.conflicts) == 0 && len(r.notSent) == 0
}

// statsAgree: failback's own counters add up and match what its hooks
// reported and the ledger recorded.
func (r *report) statsAgree() bool {
	s := r.stats
	qf, cl := s.Dropped[failback.ErrQueueFull], s.Dropped[failback.ErrClosed]
	return s.Offered == s.Succeeded+s.GaveUp+qf+cl+uint64(s.Queued)+uint64(s.InFlight) &&
		s.Queued == 0 && s.InFlight == 0 &&
		s.Succeeded == r.hooks.succeeded && s.GaveUp == r.hooks.gaveUp &&
		qf == r.hooks.dropped[failback.ErrQueueFull] && cl == r.hooks.dropped[failback.ErrClosed] &&
		s.Succeeded == uint64(r.counts[outRetried]) &&
		s.GaveUp == uint64(r.counts[outGaveUpRetries]+r.counts[outGaveUpOther]) &&
		qf == uint64(r.counts[outQueueFull]) && cl == uint64(r.counts[outClosed])
}

// print writes the accounting. The test parses it: keep the labels.
func (r *report) print(w io.Writer) {
	s := r.stats
	qf, cl := s.Dropped[failback.ErrQueueFull], s.Dropped[failback.ErrClosed]
	fmt.Fprintln(w, "\naccounting (consumer side: Invoke results and failback hooks)")
	row := func(label string, n int, note string) {
		fmt.Fprintf(w, "  %-58s %6d%s\n", label, n, note)
	}
	row("sent", r.sent, "")
	row(outcomeNames[outFirst], r.counts[outFirst], "")
	row("retried (queued by failback)", int(r.hooks.queued), fmt.Sprintf("   %d retry attempts", s.Retried))
	row(outcomeNames[outRetried], r.counts[outRetried], "")
	for _, o := range droppedOutcomes {
		label := outcomeNames[o]
		if o == outGaveUpRetries {
			label = fmt.Sprintf(label, r.retries)
		}
		note := ""
		if r.example[o] != "" {
			note = "   e.g. " + shorten(r.example[o], 110)
		}
		row(label, r.counts[o], note)
	}
	row("no outcome", len(r.noOutcome), "")
	fmt.Fprintf(w, "  identity: sent %d = delivered %d (%d first + %d after retry) + reported dropped %d + no outcome %d\n",
		r.sent, r.delivered(), r.counts[outFirst], r.counts[outRetried], r.dropped(), len(r.noOutcome))
	fmt.Fprintf(w, "  failback.Stats: offered %d = succeeded %d + gave up %d + dropped %d queue full + %d closed + %d queued + %d in flight; agrees with hooks and ledger: %s\n",
		s.Offered, s.Succeeded, s.GaveUp, qf, cl, s.Queued, s.InFlight, yesNo(r.statsAgree()))
	fmt.Fprintf(w, "  Retry-After honoured: %d waits after a 503 with Retry-After were at least that long, %d shorter\n",
		r.retryAfterOK, r.retryAfterShort)

	fmt.Fprintln(w, "\nchecked against the providers (IDs they accepted)")
	row("distinct IDs received", r.distinct, fmt.Sprintf("   in %d accepted requests", r.requests))
	row("duplicates received", len(r.duplicates), ids(r.duplicates))
	row("missing IDs (sent, never received)", len(r.missing), ids(r.missing))
	row("  of which reported dropped", len(r.missingReported), "")
	row("  of which reported delivered (silently lost)", len(r.deliveredNotReceived), ids(r.deliveredNotReceived))
	row("received although reported dropped", len(r.receivedDespiteDrop), ids(r.receivedDespiteDrop))
	lost := r.silentlyLost()
	row("silently lost (neither delivered nor reported)", len(lost), ids(lost))
	for _, c := range r.conflicts {
		fmt.Fprintln(w, "  CONFLICT:", c)
	}
	for _, id := range r.notSent {
		fmt.Fprintln(w, "  received but never sent:", id)
	}
	fmt.Fprintf(w, "  accounting identity (sent = delivered + reported dropped, 0 silently lost): %s\n",
		map[bool]string{true: "holds", false: "DOES NOT HOLD"}[r.identityHolds()])
}

// briefError describes err for the report: the attempts of a give-up, and
// the provider and root cause of the last call.
func briefError(err error) string {
	prefix := ""
	if ge, ok := errors.AsType[*rebound.RetryError](err); ok {
		prefix = fmt.Sprintf("%d attempts, last: ", ge.Attempts)
	}
	ce, ok := errors.AsType[*CallError](err)
	if !ok {
		return prefix + err.Error()
	}
	cause := ce.Err.Error()
	if oe, ok := errors.AsType[*net.OpError](ce.Err); ok && oe.Err != nil {
		cause = oe.Err.Error()
	} else if ue, ok := errors.AsType[*url.Error](ce.Err); ok {
		cause = ue.Err.Error()
	}
	if ce.Status != 0 {
		cause = fmt.Sprintf("HTTP %d %s", ce.Status, cause)
	}
	return prefix + ce.Target + " " + cause
}

// ids formats a short list of IDs.
func ids(v []int) string {
	if len(v) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("   [")
	for i, id := range v {
		if i == 12 {
			fmt.Fprintf(&b, " ... %d more", len(v)-i)
			break
		}
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprint(&b, id)
	}
	b.WriteByte(']')
	return b.String()
}

func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "NO"
}
