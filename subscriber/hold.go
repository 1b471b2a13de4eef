package subscriber

import "time"

// emptyHold is the empty-list hold of a subscription (WithEmptyListHold).
// The window opens when the registry connection is lost or re-established
// and closes hold after the subscription is confirmed again; an empty list
// that arrives in the window is held back (never longer than hold after
// its arrival). Its methods are called with the subscription's mutex
// held.
type emptyHold struct {
	windowEnd time.Time // zero while not confirmed since the window opened
	since     time.Time // when the held empty list arrived; zero: nothing held
	window    bool
	why       holdWhy
	first     bool  // the held list is the subscription's first
	checks    uint8 // Lookups of the server made (or due) during this hold
}

// holdWhy is the registry event that opened a hold window (Status.HeldReason).
type holdWhy uint8

const (
	whyLost holdWhy = iota + 1
	whyReconnected
)

var holdWhyNames = [...]string{whyLost: "registry connection lost", whyReconnected: "registry reconnected"}

func (w holdWhy) String() string { return holdWhyNames[w] }

// status fills the hold's part of a Status.
func (h *emptyHold) status(st *Status, hold time.Duration) {
	if h.since.IsZero() {
		return
	}
	st.HeldSince, st.HeldReason = h.since, h.why.String()
	if h.first {
		st.HeldReason = "first list empty; " + h.why.String()
	}
	st.HeldUntil = h.until(hold)
}

// openFirst opens the hold window of a new subscription created while the
// registry connection is down (the Connected report to come reopens it)
// or within hold of the last Connected report (the window then closes
// hold after that report), so that an empty first list from a registry
// that restarted empty is held like any other. It runs before the
// subscription starts; the caller holds m.mu.
func (h *emptyHold) openFirst(hold time.Duration, down bool, upAt time.Time) {
	switch {
	case hold <= 0:
	case down:
		h.window, h.why = true, whyLost
	case !upAt.IsZero() && time.Since(upAt) < hold:
		h.window, h.why = true, whyReconnected
		h.windowEnd = upAt.Add(hold)
	}
}

// disrupted opens the window on a real disconnection or restart (not on a
// Resubscribe).
func (h *emptyHold) disrupted(kind disruptKind) {
	switch kind {
	case disruptLost:
		h.window, h.windowEnd, h.why = true, time.Time{}, whyLost
	case disruptReconnected:
		h.window, h.windowEnd, h.why = true, time.Time{}, whyReconnected
	}
}

// confirmedAt starts the window's end: hold after the confirmation at now.
func (h *emptyHold) confirmedAt(now time.Time, hold time.Duration) {
	if h.window && h.windowEnd.IsZero() {
		h.windowEnd = now.Add(hold)
	}
}

// until is when the current hold ends at the latest: hold after the empty
// list arrived (the hard cap), or the end of the window if sooner.
func (h *emptyHold) until(hold time.Duration) time.Time {
	until := h.since.Add(hold)
	if !h.windowEnd.IsZero() && h.windowEnd.Before(until) {
		until = h.windowEnd
	}
	return until
}

// holds decides whether the empty list to deliver now is held back (first:
// it is the subscription's first list); if so, the hold's timer is set.
func (h *emptyHold) holds(s *Subscription, now time.Time, first bool) bool {
	hold := s.m.opts.hold
	if hold <= 0 || !h.window {
		return false
	}
	if !h.windowEnd.IsZero() && !now.Before(h.windowEnd) {
		h.window = false // the window is over
		return false
	}
	if h.since.IsZero() {
		h.since = now
		h.first = first
		s.dq.pushDelivery(s, resEmptyHeld, 0, now)
		if s.state == StateSubscribed {
			s.setStateLocked(StateHeld, nil)
		}
	}
	until := h.until(hold)
	if !now.Before(until) {
		return false
	}
	at := until
	if c := h.checkAt(s, until); !c.IsZero() && c.Before(at) {
		at = c
	}
	s.setTimer(timerHold, at)
	return true
}

// end ends the hold: the held list was replaced or delivered.
func (h *emptyHold) end(s *Subscription) {
	h.since, h.first, h.checks = time.Time{}, false, 0
	s.cancelTimer(timerHold)
	if s.state == StateHeld {
		s.setStateLocked(StateSubscribed, nil)
	}
}

// checkAt is when the current hold's next Lookup of the server is due (see
// WithEmptyListHold): hold/8 after the empty list arrived, then hold/4 and
// hold/2. It returns the zero time when nothing is held, when the Manager
// cannot look up, when no check is left before the hold ends (until), or
// while the subscription is not confirmed (a due check waits for the
// acknowledgement, whose delivery kick sets the timer again).
//
// Why: an empty list held after a reconnect is ended by the providers'
// re-registration push. If that push never reaches the adapter (lost, or
// overwritten in the SDK's cache by an older empty reply: nacos-sdk-go
// v2.3.2's ProcessService compares and stores without a lock), nothing
// else would end the hold before its cap, and the listener would then be
// given an empty list the registry does not hold.
func (h *emptyHold) checkAt(s *Subscription, until time.Time) time.Time {
	if h.since.IsZero() || !s.look.on(s.m) || h.checks >= 3 || s.run.st != rsSubscribed {
		return time.Time{}
	}
	at := h.since.Add(s.m.opts.hold / 8 << h.checks)
	if !at.Before(until) {
		return time.Time{}
	}
	return at
}

// checkDue reports whether a check of the server is due at now, counting
// it.
func (h *emptyHold) checkDue(s *Subscription, now time.Time) bool {
	at := h.checkAt(s, h.until(s.m.opts.hold))
	if at.IsZero() || now.Before(at) {
		return false
	}
	h.checks++
	return true
}
