package statusz

import (
	"cmp"
	"encoding/json"
	"fmt"
	"github.com/rebound-go/rebound/internal/nilness"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sony/gobreaker/v2"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/cluster"
	"github.com/rebound-go/rebound/failback"
	"github.com/rebound-go/rebound/logging"
	"github.com/rebound-go/rebound/subscriber"
)

// DefaultPageSize is the number of subscriptions an HTML page shows.
const DefaultPageSize = 100

// A StatusSource lists subscriptions: *subscriber.Manager is one.
type StatusSource interface {
	Status() []subscriber.Status
}

// A CountsSource reports aggregate figures: *subscriber.Manager is one. A
// StatusSource that also implements it gets its registry connection
// (Counts.Connection) shown.
type CountsSource interface {
	Counts() subscriber.Counts
}

// A StatsSource reports a failback invoker's counters: *failback.Invoker
// is one.
type StatsSource interface {
	Stats() failback.Stats
}

// A RegistrationSource lists a provider's registrations: Registrations
// (a slice of subscriber.Registration) is one.
type RegistrationSource interface {
	RegistrationStatus() []subscriber.RegistrationStatus
}

// A BreakerSource lists the circuit breakers that are not closed (open or
// half-open): *cluster.BreakerDirectory is one.
type BreakerSource interface {
	Open() []cluster.BreakerStatus
}

// Registrations is a RegistrationSource over a fixed set of
// Registrations (nacos.Register's, etcd.Register's); nil entries are
// skipped.
type Registrations []subscriber.Registration

// RegistrationStatus returns the Status of each Registration.
func (r Registrations) RegistrationStatus() []subscriber.RegistrationStatus {
	out := make([]subscriber.RegistrationStatus, 0, len(r))
	for _, g := range r {
		if !nilness.Is(g) {
			out = append(out, g.Status())
		}
	}
	return out
}

// An Option configures New. A nil Option is ignored.
type Option interface{ apply(*Handler) error }

type optionFunc func(*Handler) error

func (f optionFunc) apply(h *Handler) error { return f(h) }

// WithSubscriptions adds a section for src (for example a
// *subscriber.Manager) under name. Names must be unique and not empty;
// src must not be nil, nor a nil pointer. If src also implements
// CountsSource, its registry connection is shown.
func WithSubscriptions(name string, src StatusSource) Option {
	return optionFunc(func(h *Handler) error {
		if err := h.checkName("statusz.WithSubscriptions", name, nilness.Is(src)); err != nil {
			return err
		}
		h.subs = append(h.subs, namedSubs{name, src})
		return nil
	})
}

// WithFailback adds a section for src (for example a *failback.Invoker)
// under name. Names must be unique and not empty; src must not be nil,
// nor a nil pointer.
func WithFailback(name string, src StatsSource) Option {
	return optionFunc(func(h *Handler) error {
		if err := h.checkName("statusz.WithFailback", name, nilness.Is(src)); err != nil {
			return err
		}
		h.fbs = append(h.fbs, namedStats{name, src})
		return nil
	})
}

// WithRegistrations adds a section for a provider's registrations under
// name (beside the subscriptions): each registration's state, counts and
// last error. Names must be unique and not empty; src must not be nil.
func WithRegistrations(name string, src RegistrationSource) Option {
	return optionFunc(func(h *Handler) error {
		_, fixed := src.(Registrations) // an empty (even nil) set is a set
		if err := h.checkName("statusz.WithRegistrations", name, !fixed && nilness.Is(src)); err != nil {
			return err
		}
		h.regs = append(h.regs, namedRegs{name, src})
		return nil
	})
}

// WithBreakers adds the open (and half-open) circuit breakers of src (for
// example the *cluster.BreakerDirectory a failback invoker calls through)
// under name: each one's target, state, since when and for how long, when
// it next lets a probe through, and whether its target is out of selection
// ("ejected") or over the ejection share and still called. When name is
// also the name of a WithFailback section (in either order), the breakers
// are listed in that section, beside the invoker's Stats.BreakerWaits;
// otherwise they get a section of their own. Names must otherwise be
// unique and not empty; src must not be nil, nor a nil pointer.
func WithBreakers(name string, src BreakerSource) Option {
	return optionFunc(func(h *Handler) error {
		const fn = "statusz.WithBreakers"
		switch {
		case nilness.Is(src):
			return &rebound.ArgumentError{Func: fn, Arg: "src", Reason: "must not be nil", Err: rebound.ErrInvalidArgument}
		case strings.TrimSpace(name) == "":
			return &rebound.ArgumentError{Func: fn, Arg: "name", Reason: "must not be empty", Err: rebound.ErrInvalidArgument}
		}
		for _, nb := range h.brks {
			if nb.name == name {
				return &rebound.ArgumentError{Func: fn, Arg: "name", Reason: fmt.Sprintf("%q is used twice", name), Err: rebound.ErrInvalidArgument}
			}
		}
		h.brks = append(h.brks, namedBreakers{name, src})
		return nil
	})
}

// WithEvents adds a "Recent events" section for log under name: the
// events it observed, newest first (see EventLog). Names must be unique
// and not empty; log must not be nil.
func WithEvents(name string, log *EventLog) Option {
	return optionFunc(func(h *Handler) error {
		if err := h.checkName("statusz.WithEvents", name, log == nil); err != nil {
			if ae, ok := err.(*rebound.ArgumentError); ok && ae.Arg == "src" {
				ae.Arg = "log"
			}
			return err
		}
		h.evs = append(h.evs, namedEvents{name, log})
		return nil
	})
}

// WithPageSize sets how many subscriptions an HTML page shows (default
// DefaultPageSize); it must be at least 1.
func WithPageSize(n int) Option {
	return optionFunc(func(h *Handler) error {
		if n < 1 {
			return &rebound.ArgumentError{Func: "statusz.WithPageSize", Arg: "n", Reason: "must be at least 1", Err: rebound.ErrInvalidArgument}
		}
		h.pageSize = n
		return nil
	})
}

type namedSubs struct {
	name string
	src  StatusSource
}

type namedStats struct {
	name string
	src  StatsSource
}

type namedBreakers struct {
	name string
	src  BreakerSource
}

type namedEvents struct {
	name string
	log  *EventLog
}

type namedRegs struct {
	name string
	src  RegistrationSource
}

// Handler serves the status page. Create it with New; it is safe for
// concurrent use. Each request reads its sources afresh (Status, Stats):
// the handler holds no state of its own.
type Handler struct {
	subs     []namedSubs
	fbs      []namedStats
	regs     []namedRegs
	brks     []namedBreakers
	evs      []namedEvents
	names    map[string]bool
	pageSize int
	now      func() time.Time
}

var _ http.Handler = (*Handler)(nil)

// New returns a Handler showing the given sources.
//
// GET serves HTML unless the query has format=json or the Accept header
// prefers application/json; other methods get 405; a malformed query gets
// 400. Query parameters (HTML and JSON alike): state (the name of one of
// subscriber.States: pending, subscribed, retrying, held, stopped; or
// "stuck" for all but subscribed), q (a substring of the key), page (from
// 1; a page past the last is empty), limit (rows per page; default every
// subscription for JSON, WithPageSize for HTML; 0: all) and, for HTML,
// refresh (reload the page every so many seconds, with a meta refresh: no
// JavaScript). Subscriptions are ordered stuck first: retrying, held,
// pending, then any other state but stopped and subscribed, then stopped,
// each the longest in its state first; then subscribed by key.
//
// The page's links and its filter form are relative to the page itself
// (query-only references such as "?state=retrying&limit=10"), so they stay
// on the page's address wherever the handler is mounted, and they keep the
// query's parameters (the filter form starts again at page 1).
func New(opts ...Option) (*Handler, error) {
	h := &Handler{pageSize: DefaultPageSize, names: map[string]bool{}, now: time.Now}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o.apply(h); err != nil {
			return nil, err
		}
	}
	// A breaker source goes in the failback section of its name, or gets
	// a section of its own under a name no other section uses.
	fbNames := map[string]bool{}
	for _, nf := range h.fbs {
		fbNames[nf.name] = true
	}
	for _, nb := range h.brks {
		if fbNames[nb.name] {
			continue
		}
		if h.names[nb.name] {
			return nil, &rebound.ArgumentError{Func: "statusz.WithBreakers", Arg: "name",
				Reason: fmt.Sprintf("%q is used twice (only a WithFailback section may share a name with WithBreakers)", nb.name), Err: rebound.ErrInvalidArgument}
		}
		h.names[nb.name] = true
	}
	return h, nil
}

func (h *Handler) checkName(fn, name string, nilSrc bool) error {
	switch {
	case nilSrc:
		return &rebound.ArgumentError{Func: fn, Arg: "src", Reason: "must not be nil", Err: rebound.ErrInvalidArgument}
	case strings.TrimSpace(name) == "":
		return &rebound.ArgumentError{Func: fn, Arg: "name", Reason: "must not be empty", Err: rebound.ErrInvalidArgument}
	case h.names[name]:
		return &rebound.ArgumentError{Func: fn, Arg: "name", Reason: fmt.Sprintf("%q is used twice", name), Err: rebound.ErrInvalidArgument}
	}
	h.names[name] = true
	return nil
}

// Page is the JSON document the handler serves (format=json).
type Page struct {
	Generated     time.Time          `json:"generated"`
	Managers      []ManagerPage      `json:"managers"`
	Registrations []RegistrationPage `json:"registrations"`
	Failback      []FailbackPage     `json:"failback"`
	// Breakers has the WithBreakers sources whose name is not a failback
	// section's (those are in FailbackPage.Breakers).
	Breakers []BreakerPage `json:"breakers"`
	// Events has the WithEvents sections.
	Events []EventsPage `json:"events"`
}

// EventsPage is a WithEvents section: the events its EventLog kept,
// newest first, and how many it observed in all.
type EventsPage struct {
	Name     string     `json:"name"`
	Observed uint64     `json:"observed"`
	Events   []EventRow `json:"events"`
}

// BreakerPage is a WithBreakers source of its own section.
type BreakerPage struct {
	Name     string       `json:"name"`
	Breakers []BreakerRow `json:"breakers"`
}

// BreakerRow is one breaker that is not closed: cluster.BreakerStatus.
// Rows are ordered the longest open first, then by target.
type BreakerRow struct {
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
func (r BreakerRow) Age() time.Duration { return r.age }

// ProbeIn is how long until an open breaker lets a probe through, when
// the page was generated (0 for half-open, or when it is due).
func (r BreakerRow) ProbeIn() time.Duration { return r.probeIn }

// Open reports whether the breaker is open (not half-open).
func (r BreakerRow) Open() bool { return r.State == gobreaker.StateOpen.String() }

// RegistrationPage is one registration source (WithRegistrations).
type RegistrationPage struct {
	Name string `json:"name"`
	// Counts has every state, also at 0.
	Counts        map[string]int    `json:"counts"`
	Registrations []RegistrationRow `json:"registrations"`
}

// RegistrationRow is one registration: subscriber.RegistrationStatus.
type RegistrationRow struct {
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
func (r RegistrationRow) Age() time.Duration { return r.age }

// ManagerPage is one subscription source.
type ManagerPage struct {
	Name string `json:"name"`
	// Registry is the connection state the registry client last reported
	// ("connected", "disconnected"); empty if not known.
	Registry string `json:"registry,omitempty"`
	// Counts has every state, also at 0.
	Counts map[string]int `json:"counts"`
	// Total is the number of subscriptions that match the filter; Page and
	// Pages say which slice of them Subscriptions is.
	Total         int            `json:"total"`
	Page          int            `json:"page"`
	Pages         int            `json:"pages"`
	Subscriptions []Subscription `json:"subscriptions"`
}

// Subscription is one row.
type Subscription struct {
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

// FailbackPage is one failback invoker.
type FailbackPage struct {
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
	Breakers []BreakerRow `json:"breakers,omitzero"`
}

// states is subscriber.States in the page's order, stuck first (see rank).
var states = func() []subscriber.State {
	s := subscriber.States()
	slices.SortStableFunc(s, func(a, b subscriber.State) int { return cmp.Compare(rank(a), rank(b)) })
	return s
}()

// rank orders states stuck first: retrying, held, pending, any state not
// named here, stopped, and subscribed last.
func rank(s subscriber.State) int {
	switch s {
	case subscriber.StateRetrying:
		return 0
	case subscriber.StateHeld:
		return 1
	case subscriber.StatePending:
		return 2
	case subscriber.StateStopped:
		return 4
	case subscriber.StateSubscribed:
		return 5
	}
	return 3
}

// stateNamed returns the State whose String is name.
func stateNamed(name string) (subscriber.State, bool) {
	for _, s := range states {
		if s.String() == name {
			return s, true
		}
	}
	return 0, false
}

func stateNames() []string {
	names := make([]string, len(states))
	for i, s := range states {
		names[i] = s.String()
	}
	return names
}

type query struct {
	state   string // "" all, "stuck", or a state name
	q       string
	page    int // from 1
	limit   int // 0: all
	refresh int // seconds; 0: none (HTML only)

	limitSet bool // limit was given (links keep it)
}

func parseQuery(r *http.Request, jsonOut bool, pageSize int) (query, error) {
	v := r.URL.Query()
	q := query{state: v.Get("state"), q: v.Get("q"), page: 1}
	if _, ok := stateNamed(q.state); !ok && q.state != "" && q.state != "stuck" {
		return q, fmt.Errorf("state=%q: want one of %s, or stuck", q.state, strings.Join(stateNames(), ", "))
	}
	if p := v.Get("page"); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 {
			return q, fmt.Errorf("page=%q: want a number from 1", p)
		}
		q.page = n
	}
	if !jsonOut {
		q.limit = pageSize
	}
	if r := v.Get("refresh"); r != "" {
		n, err := strconv.Atoi(r)
		if err != nil || n < 1 || n > 3600 {
			return q, fmt.Errorf("refresh=%q: want seconds from 1 to 3600", r)
		}
		q.refresh = n
	}
	if l := v.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 0 {
			return q, fmt.Errorf("limit=%q: want a number from 0 (all)", l)
		}
		q.limit, q.limitSet = n, true
	}
	return q, nil
}

func (q query) match(st subscriber.Status, key string) bool {
	switch q.state {
	case "":
	case "stuck":
		if st.State == subscriber.StateSubscribed {
			return false
		}
	default:
		if st.State.String() != q.state {
			return false
		}
	}
	return q.q == "" || strings.Contains(key, q.q)
}

// Snapshot builds the page for a query (the JSON document); exported
// through ServeHTTP only.
func (h *Handler) snapshot(q query) Page {
	now := h.now()
	p := Page{Generated: now, Managers: []ManagerPage{}, Registrations: []RegistrationPage{}, Failback: []FailbackPage{},
		Breakers: []BreakerPage{}, Events: []EventsPage{}}
	for _, ns := range h.subs {
		p.Managers = append(p.Managers, h.managerPage(ns, q, now))
	}
	for _, nr := range h.regs {
		p.Registrations = append(p.Registrations, registrationPage(nr, now))
	}
	for _, nf := range h.fbs {
		st := nf.src.Stats()
		fp := FailbackPage{Name: nf.name, Queued: st.Queued, InFlight: st.InFlight, Offered: st.Offered,
			Retried: st.Retried, Succeeded: st.Succeeded, GaveUp: st.GaveUp, Dropped: map[string]uint64{},
			Throttled: st.Throttled, Quarantined: st.Quarantined, BreakerWaits: st.BreakerWaits}
		for r, n := range st.Dropped {
			fp.Dropped[string(r)] = n
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
			p.Breakers = append(p.Breakers, BreakerPage{Name: nb.name, Breakers: breakerRows(nb.src, now)})
		}
	}
	for _, ne := range h.evs {
		rows, n := ne.log.Events()
		p.Events = append(p.Events, EventsPage{Name: ne.name, Observed: n, Events: rows})
	}
	return p
}

// breakerRows lists src's breakers that are not closed (a source that
// returns closed ones too has them left out), the longest open first.
// Targets are registry data: they pass through logging.Scrub like error
// texts (an address with credentials in it), and the template escapes
// them.
func breakerRows(src BreakerSource, now time.Time) []BreakerRow {
	all := src.Open()
	rows := make([]BreakerRow, 0, len(all))
	for _, s := range all {
		if s.State == gobreaker.StateClosed {
			continue
		}
		r := BreakerRow{Target: logging.Scrub(s.Target), State: s.State.String(), Since: s.Since, Until: s.Until, Ejected: s.Ejected,
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
	slices.SortStableFunc(rows, func(a, b BreakerRow) int {
		return cmp.Or(a.Since.Compare(b.Since), strings.Compare(a.Target, b.Target))
	})
	return rows
}

// registrationPage lists a source's registrations, those not registered
// first (repairing, registering, deregistering, stopped), the longest in
// their state first, then the registered ones by key.
func registrationPage(nr namedRegs, now time.Time) RegistrationPage {
	all := nr.src.RegistrationStatus()
	rp := RegistrationPage{Name: nr.name, Counts: map[string]int{}, Registrations: make([]RegistrationRow, 0, len(all))}
	for _, s := range subscriber.RegistrationStates() {
		rp.Counts[s.String()] = 0
	}
	for _, st := range all {
		rp.Counts[st.State.String()]++
		r := RegistrationRow{Registry: st.Registry, Key: st.Key.String(),
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
	slices.SortStableFunc(rp.Registrations, func(a, b RegistrationRow) int {
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

func (h *Handler) managerPage(ns namedSubs, q query, now time.Time) ManagerPage {
	all := ns.src.Status()
	mp := ManagerPage{Name: ns.name, Counts: map[string]int{}}
	for _, s := range states {
		mp.Counts[s.String()] = 0
	}
	if cs, ok := ns.src.(CountsSource); ok {
		c := cs.Counts()
		if c.Connection != 0 {
			mp.Registry = c.Connection.String()
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
	mp.Subscriptions = make([]Subscription, len(rows))
	for i, r := range rows {
		st := r.st
		s := Subscription{Key: r.key, State: st.State.String(), Since: st.Since, Attempts: st.Attempts,
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

// ServeHTTP serves the page; see New.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	jsonOut := wantsJSON(r)
	q, err := parseQuery(r, jsonOut, h.pageSize)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	p := h.snapshot(q)
	w.Header().Set("Cache-Control", "no-store")
	if jsonOut {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(p)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_ = page.Execute(w, htmlData{Page: p, q: q})
}

func wantsJSON(r *http.Request) bool {
	if f := r.URL.Query().Get("format"); f != "" {
		return f == "json"
	}
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		mt, _, _ := strings.Cut(strings.TrimSpace(part), ";")
		switch mt {
		case "application/json":
			return true
		case "text/html", "application/xhtml+xml":
			return false
		}
	}
	return false
}

// Age is how long the subscription has been in its state when the page was
// generated.
func (s Subscription) Age() time.Duration { return s.age }
