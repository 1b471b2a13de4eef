package statusz

import (
	"cmp"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sony/gobreaker/v2"

	"github.com/rebound-go/rebound/internal/nilness"
	"github.com/rebound-go/rebound/logging"
	"github.com/rebound-go/rebound/subscriber"
)

// jsonPage is the JSON document the handler serves (format=json).
type jsonPage struct {
	Generated     time.Time             `json:"generated"`
	Managers      []managerSection      `json:"managers"`
	Registrations []registrationSection `json:"registrations"`
	Failback      []failbackSection     `json:"failback"`
	// Breakers has the WithBreakers sources whose name is not a failback
	// section's (those are in failbackSection.Breakers).
	Breakers []breakerSection `json:"breakers"`
	// Events has the WithEvents sections.
	Events []eventsSection `json:"events"`
}

// eventsSection is a WithEvents section: the events its EventLog kept,
// newest first, and how many it observed in all.
type eventsSection struct {
	Name     string     `json:"name"`
	Observed uint64     `json:"observed"`
	Events   []eventRow `json:"events"`
}

// breakerSection is a WithBreakers source of its own section.
type breakerSection struct {
	Name     string       `json:"name"`
	Breakers []breakerRow `json:"breakers"`
}

// breakerRow is one breaker that is not closed: cluster.BreakerStatus.
// Rows are ordered the longest open first, then by target.
type breakerRow struct {
	Target string `json:"target"`
	// State is gobreaker's name of the state: "open" or "half-open".
	State string    `json:"state"`
	Since time.Time `json:"since,omitzero"`
	// Until is when an open breaker lets a probe through; absent for a
	// half-open one.
	Until time.Time `json:"until,omitzero"`
	// Ejected reports whether the target is out of selection; an open
	// breaker over the ejection share is not (its target is still
	// called).
	Ejected bool `json:"ejected"`
	// The counts are gobreaker's in the current state: it resets them at
	// each change, so they are zero while open and count the probes while
	// half-open.
	Requests             uint32 `json:"requests"`
	TotalSuccesses       uint32 `json:"total_successes"`
	TotalFailures        uint32 `json:"total_failures"`
	ConsecutiveSuccesses uint32 `json:"consecutive_successes"`
	ConsecutiveFailures  uint32 `json:"consecutive_failures"`

	age, probeIn time.Duration
}

// Age is how long the breaker has been in its state when the page was
// generated.
func (r breakerRow) Age() time.Duration { return r.age }

// ProbeIn is how long until an open breaker lets a probe through, when
// the page was generated (0 for half-open, or when it is due).
func (r breakerRow) ProbeIn() time.Duration { return r.probeIn }

// Open reports whether the breaker is open (not half-open).
func (r breakerRow) Open() bool { return r.State == gobreaker.StateOpen.String() }

// registrationSection is one registration source (WithRegistrations).
type registrationSection struct {
	Name string `json:"name"`
	// Counts has every state, also at 0.
	Counts        map[string]int    `json:"counts"`
	Registrations []registrationRow `json:"registrations"`
}

// registrationRow is one registration: subscriber.RegistrationStatus.
type registrationRow struct {
	Registry      string    `json:"registry"`
	Key           string    `json:"key"`
	Instance      string    `json:"instance"`
	State         string    `json:"state"`
	Since         time.Time `json:"since,omitzero"`
	Registrations int       `json:"registrations"`
	Repairs       int       `json:"repairs"`
	Attempts      int       `json:"attempts"`
	LastError     string    `json:"last_error,omitempty"`
	LastErrorAt   time.Time `json:"last_error_at,omitzero"`

	age time.Duration
}

// Age is how long the registration has been in its state when the page
// was generated.
func (r registrationRow) Age() time.Duration { return r.age }

// managerSection is one subscription source.
type managerSection struct {
	Name string `json:"name"`
	// Registry is the connection state the registry client last reported
	// ("connected", "disconnected"); empty if not known.
	Registry string `json:"registry,omitempty"`
	// Counts has every state, also at 0.
	Counts map[string]int `json:"counts"`
	// Total is the number of subscriptions that match the filter; jsonPage and
	// Pages say which slice of them Subscriptions is.
	Total         int               `json:"total"`
	Page          int               `json:"page"`
	Pages         int               `json:"pages"`
	Subscriptions []subscriptionRow `json:"subscriptions"`
}

// subscriptionRow is one row.
type subscriptionRow struct {
	Key           string    `json:"key"`
	State         string    `json:"state"`
	Since         time.Time `json:"since,omitzero"`
	Attempts      int       `json:"attempts"`
	TotalAttempts int       `json:"total_attempts"`
	LastError     string    `json:"last_error,omitempty"`
	Instances     int       `json:"instances"`
	Deliveries    int       `json:"deliveries"`
	LastDelivery  time.Time `json:"last_delivery,omitzero"`
	ConfirmedAt   time.Time `json:"confirmed_at,omitzero"`
	ConfirmReason string    `json:"confirm_reason,omitempty"`
	// HeldSince, HeldUntil and HeldReason are set while an empty list is
	// held back (subscriber.StateHeld; see subscriber.Status).
	HeldSince  time.Time `json:"held_since,omitzero"`
	HeldUntil  time.Time `json:"held_until,omitzero"`
	HeldReason string    `json:"held_reason,omitempty"`

	age time.Duration // in its state, for the HTML page (Age)
}

// failbackSection is one failback invoker.
type failbackSection struct {
	Name      string            `json:"name"`
	Queued    int               `json:"queued"`
	InFlight  int               `json:"in_flight"`
	Offered   uint64            `json:"offered"`
	Retried   uint64            `json:"retried"`
	Succeeded uint64            `json:"succeeded"`
	GaveUp    uint64            `json:"gave_up"`
	Dropped   map[string]uint64 `json:"dropped"`
	// Throttled and Quarantined are failback.Stats.Throttled (retries
	// the adaptive throttle refused) and Stats.Quarantined (stored calls
	// set aside at load).
	Throttled   uint64 `json:"throttled"`
	Quarantined uint64 `json:"quarantined"`
	// BreakerWaits is Stats.BreakerWaits: retries that waited for a
	// circuit breaker instead of being attempted.
	BreakerWaits uint64 `json:"breaker_waits"`
	// Breakers lists the open breakers of the WithBreakers source of the
	// same name; absent without one, [] when none is open.
	Breakers []breakerRow `json:"breakers,omitzero"`
}

// snapshot builds the JSON document for a query (see docs/statusz.md,
// which describes every field: keep both in step).
func (h *handler) snapshot(q query) jsonPage {
	now := h.now()
	p := jsonPage{Generated: now, Managers: []managerSection{}, Registrations: []registrationSection{}, Failback: []failbackSection{},
		Breakers: []breakerSection{}, Events: []eventsSection{}}
	for _, ns := range h.subs {
		p.Managers = append(p.Managers, h.managerPage(ns, q, now))
	}
	for _, nr := range h.regs {
		p.Registrations = append(p.Registrations, registrationPage(nr, now))
	}
	for _, nf := range h.fbs {
		st := nf.src.Stats()
		fp := failbackSection{Name: nf.name, Queued: st.Queued, InFlight: st.InFlight, Offered: st.Offered,
			Retried: st.Retried, Succeeded: st.Succeeded, GaveUp: st.GaveUp, Dropped: map[string]uint64{},
			Throttled: st.Throttled, Quarantined: st.Quarantined, BreakerWaits: st.BreakerWaits}
		for r, n := range st.Dropped {
			fp.Dropped[dropLabel(r)] += n // two reasons of one label add up
		}
		for _, nb := range h.brks {
			if nb.name == nf.name {
				fp.Breakers = breakerRows(nb.src, now)
			}
		}
		p.Failback = append(p.Failback, fp)
	}
	for _, nb := range h.brks {
		if !slices.ContainsFunc(h.fbs, func(nf namedStats) bool { return nf.name == nb.name }) {
			p.Breakers = append(p.Breakers, breakerSection{Name: nb.name, Breakers: breakerRows(nb.src, now)})
		}
	}
	for _, ne := range h.evs {
		rows, n := ne.log.snapshot()
		p.Events = append(p.Events, eventsSection{Name: ne.name, Observed: n, Events: rows})
	}
	return p
}

// breakerRows lists src's breakers that are not closed (a source that
// returns closed ones too has them left out), the longest open first.
// Targets are registry data: they pass through logging.Scrub like error
// texts (an address with credentials in it), and the template escapes
// them.
func breakerRows(src breakerSource, now time.Time) []breakerRow {
	all := src.Open()
	rows := make([]breakerRow, 0, len(all))
	for _, s := range all {
		if s.State == gobreaker.StateClosed {
			continue
		}
		r := breakerRow{Target: logging.Scrub(s.Target), State: s.State.String(), Since: s.Since, Until: s.Until, Ejected: s.Ejected,
			Requests: s.Counts.Requests, TotalSuccesses: s.Counts.TotalSuccesses, TotalFailures: s.Counts.TotalFailures,
			ConsecutiveSuccesses: s.Counts.ConsecutiveSuccesses, ConsecutiveFailures: s.Counts.ConsecutiveFailures}
		if !s.Since.IsZero() {
			r.age = now.Sub(s.Since)
		}
		if !s.Until.IsZero() {
			r.probeIn = max(0, s.Until.Sub(now))
		}
		rows = append(rows, r)
	}
	slices.SortStableFunc(rows, func(a, b breakerRow) int {
		return cmp.Or(a.Since.Compare(b.Since), strings.Compare(a.Target, b.Target))
	})
	return rows
}

// registrationPage lists a source's registrations, those not registered
// first (repairing, registering, deregistering, stopped), the longest in
// their state first, then the registered ones by key.
func registrationPage(nr namedRegs, now time.Time) registrationSection {
	all := make([]subscriber.RegistrationStatus, 0, len(nr.regs))
	for _, g := range nr.regs {
		if !nilness.Is(g) {
			all = append(all, g.Status())
		}
	}
	rp := registrationSection{Name: nr.name, Counts: map[string]int{}, Registrations: make([]registrationRow, 0, len(all))}
	for s := subscriber.RegistrationRegistering; s <= subscriber.RegistrationStopped; s++ {
		rp.Counts[s.String()] = 0
	}
	for _, st := range all {
		rp.Counts[st.State.String()]++
		r := registrationRow{Registry: st.Registry, Key: st.Key.String(),
			Instance: net.JoinHostPort(st.Instance.IP, strconv.FormatUint(st.Instance.Port, 10)),
			State:    st.State.String(), Since: st.Since, Registrations: st.Registrations, Repairs: st.Repairs,
			Attempts: st.Attempts, LastErrorAt: st.LastErrAt}
		if st.LastErr != nil {
			r.LastError = logging.Scrub(st.LastErr.Error())
		}
		if !st.Since.IsZero() {
			r.age = now.Sub(st.Since)
		}
		rp.Registrations = append(rp.Registrations, r)
	}
	regRank := func(s string) int {
		if s == subscriber.RegistrationRegistered.String() {
			return 1
		}
		return 0
	}
	slices.SortStableFunc(rp.Registrations, func(a, b registrationRow) int {
		if c := cmp.Compare(regRank(a.State), regRank(b.State)); c != 0 {
			return c
		}
		if regRank(a.State) == 0 {
			if c := a.Since.Compare(b.Since); c != 0 {
				return c
			}
		}
		return cmp.Or(strings.Compare(a.Key, b.Key), strings.Compare(a.Instance, b.Instance))
	})
	return rp
}

type row struct {
	st  *subscriber.Status
	key string
}

func (h *handler) managerPage(ns namedSubs, q query, now time.Time) managerSection {
	all := ns.src.Status()
	mp := managerSection{Name: ns.name, Counts: map[string]int{}}
	for _, s := range states {
		mp.Counts[s.String()] = 0
	}
	if cs, ok := ns.src.(connSource); ok {
		if up, reported := cs.Connected(); reported {
			mp.Registry = connWord(up)
		}
	}
	rows := make([]row, 0, len(all))
	for i := range all {
		st := &all[i]
		mp.Counts[st.State.String()]++
		key := st.Key.String()
		if q.match(*st, key) {
			rows = append(rows, row{st, key})
		}
	}
	slices.SortFunc(rows, func(a, b row) int {
		if c := cmp.Compare(rank(a.st.State), rank(b.st.State)); c != 0 {
			return c
		}
		if a.st.State != subscriber.StateSubscribed {
			if c := a.st.Since.Compare(b.st.Since); c != 0 {
				return c
			}
		}
		return strings.Compare(a.key, b.key)
	})
	mp.Total, mp.Page, mp.Pages = len(rows), q.page, 1
	if q.limit > 0 {
		// page and limit come from the query: no product or sum of them
		// is computed that could overflow.
		n := len(rows)
		pages := n / q.limit
		if n%q.limit != 0 {
			pages++
		}
		mp.Pages = max(1, pages)
		if q.page > mp.Pages {
			rows = nil
		} else {
			lo := (q.page - 1) * q.limit // below n, or 0: page <= Pages
			rows = rows[lo : lo+min(q.limit, n-lo)]
		}
	} else if q.page > 1 {
		rows = nil
	}
	mp.Subscriptions = make([]subscriptionRow, len(rows))
	for i, r := range rows {
		st := r.st
		s := subscriptionRow{Key: r.key, State: st.State.String(), Since: st.Since, Attempts: st.Attempts,
			TotalAttempts: st.TotalAttempts, Instances: st.Instances, Deliveries: st.Deliveries,
			ConfirmedAt: st.ConfirmedAt, ConfirmReason: st.ConfirmReason, LastDelivery: st.LastDelivery,
			HeldSince: st.HeldSince, HeldUntil: st.HeldUntil, HeldReason: logging.Scrub(st.HeldReason)}
		if st.LastErr != nil {
			s.LastError = logging.Scrub(st.LastErr.Error())
		}
		if !st.Since.IsZero() {
			s.age = now.Sub(st.Since)
		}
		mp.Subscriptions[i] = s
	}
	return mp
}

// Age is how long the subscription has been in its state when the page was
// generated.
func (s subscriptionRow) Age() time.Duration { return s.age }
