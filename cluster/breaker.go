package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sony/gobreaker/v2"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/internal/telemetry"
	"github.com/rebound-go/rebound/logging"
)

// Breaker defaults: what a BreakerDirectory fills into the gobreaker
// Settings of a target when the settings factory leaves the field zero.
const (
	// DefaultMaxEjected is the default share of a service's targets whose
	// breakers may keep them out of selection at once (WithMaxEjected).
	DefaultMaxEjected = 0.5
	// DefaultConsecutiveFailures is the number of consecutive failures
	// that trips a breaker whose Settings have no ReadyToTrip
	// (WithConsecutiveFailures), as Envoy's consecutive_5xx.
	DefaultConsecutiveFailures = 5
	// DefaultOpenTimeout is how long a tripped breaker stays open before
	// it lets one probe through (half-open) when its Settings have no
	// Timeout (WithOpenTimeout), as Envoy's base_ejection_time.
	DefaultOpenTimeout = 30 * time.Second
)

// BreakerOpenError is the error of a call that no breaker let through:
// List returns it when the breaker of every listed target is open (and the
// ejection share, WithMaxEjected, allows them all out), and an Invoker that
// List returned returns it when its breaker refused the call after all (two
// calls raced for one half-open probe). It wraps ErrNoInvokers, so a
// caller that retries an empty directory retries this too, and, for a
// refusal by one breaker, gobreaker.ErrOpenState or ErrTooManyRequests.
type BreakerOpenError struct {
	// Target is the refusing invoker's Target; "" when List refused.
	Target string
	// Until is the earliest time a breaker is expected to let a probe
	// through (the earliest end of an open timeout). A retry that waits
	// until then is not an attempt wasted on a breaker.
	Until time.Time
	// Err is gobreaker's refusal (ErrOpenState, ErrTooManyRequests), nil
	// when List refused.
	Err error
}

func (e *BreakerOpenError) Error() string {
	if e.Target != "" {
		return fmt.Sprintf("cluster: breaker of %s refused the call (%v); next probe at %s", e.Target, e.Err, e.Until.Format(time.RFC3339Nano))
	}
	return "cluster: every target's breaker is open; next probe at " + e.Until.Format(time.RFC3339Nano)
}

// Unwrap returns ErrNoInvokers and Err.
func (e *BreakerOpenError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrNoInvokers}
	}
	return []error{ErrNoInvokers, e.Err}
}

// BreakerEvent is a breaker's state change: the Detail of the
// rebound.EventStateChanged a BreakerDirectory emits (and what
// BreakerHooks.StateChanged receives).
type BreakerEvent struct {
	Target   string
	From, To gobreaker.State
	// At is when the directory saw the change (gobreaker changes state
	// lazily: open becomes half-open at the first look after the
	// timeout).
	At time.Time
}

// A BreakerDirectory emits a rebound.EventStateChanged, Detail a
// BreakerEvent, for each state change of a breaker, to the observers of
// WithBreakerObserver; BreakerHooks is the typed adapter. gobreaker calls
// its OnStateChange under its own mutex; a BreakerDirectory only queues
// the change there and calls the observers after gobreaker has returned,
// from the goroutine whose call caused the change (a List or an Invoke),
// with no lock held, one event at a time in the order of the changes: a
// slow observer delays that call, nothing else (wrap it in a
// rebound.Queue to delay nothing). An observer that panics is recovered
// and logged. Nil fields are skipped.
type BreakerHooks struct {
	StateChanged func(BreakerEvent)
}

// Observe calls StateChanged with e.Detail, if it is a BreakerEvent.
func (h BreakerHooks) Observe(e rebound.Event) {
	if ev, ok := e.Detail.(BreakerEvent); ok && h.StateChanged != nil {
		h.StateChanged(ev)
	}
}

// BreakerStatus is one target's breaker, as BreakerDirectory.Breakers
// reports it.
type BreakerStatus struct {
	Target string
	State  gobreaker.State
	// Since is when the breaker entered State (when the directory first
	// saw the target, for a breaker that has always been closed).
	Since time.Time
	// Until is when an open breaker lets a probe through; zero otherwise.
	Until time.Time
	// Ejected reports whether the target was out of selection at the last
	// List: its breaker open (or half-open with its probes taken) within
	// the ejection share. An open breaker beyond the share is not ejected:
	// its target is called anyway.
	Ejected bool
	Counts  gobreaker.Counts
}

// A BreakerOption configures NewBreakerDirectory.
type BreakerOption interface {
	applyBreaker(*breakerConfig)
}

type breakerOptionFunc func(*breakerConfig)

func (f breakerOptionFunc) applyBreaker(c *breakerConfig) { f(c) }

type breakerConfig struct {
	settings func(target string) gobreaker.Settings
	share    float64
	failures uint32
	timeout  time.Duration
	failure  func(error) bool
	obs      []rebound.Observer
	logger   *zap.Logger
	mp       metric.MeterProvider
	errs     []error
}

func (c *breakerConfig) bad(fn, arg, reason string) {
	c.errs = append(c.errs, &rebound.ArgumentError{Func: "cluster." + fn, Arg: arg, Reason: reason})
}

// WithBreakerSettings sets the factory of each target's gobreaker
// Settings, called once when the directory first lists the target (and
// again if the target leaves and comes back: its breaker then starts
// closed). Every field is gobreaker's, with its meaning and its defaults,
// except that the directory fills in, when left zero: Name (the target),
// ReadyToTrip (WithConsecutiveFailures), Timeout (WithOpenTimeout) and
// IsSuccessful (the opposite of WithBreakerClassifier). OnStateChange, if
// set, is called like the other hooks: after gobreaker's mutex is released
// (see BreakerHooks). MaxRequests is the number of probes a half-open
// breaker lets through (gobreaker's default, 1: a recovering target gets
// one call, not a burst). Default: gobreaker.Settings{} for every target.
// A nil factory is a *rebound.ArgumentError.
func WithBreakerSettings(factory func(target string) gobreaker.Settings) BreakerOption {
	return breakerOptionFunc(func(c *breakerConfig) {
		if factory == nil {
			c.bad("WithBreakerSettings", "factory", "must not be nil: it returns the gobreaker.Settings of a target")
			return
		}
		c.settings = factory
	})
}

// WithMaxEjected sets the largest share of a service's listed targets that
// open breakers may take out of selection at once, as Envoy's
// max_ejection_percent: floor(share × targets) (so with 3 targets and the
// default 0.5, one). When more breakers are open, the ones that opened
// first (from closed: a half-open breaker keeps its place) stay out and
// the others are called anyway (if every provider fails, the fault is
// likely not theirs: keep sending, paced by the caller's budget and
// throttle); a call through an open breaker is then
// made without it and not counted. 1 lets every target out: List then
// returns a *BreakerOpenError when all are open. share must be in (0, 1].
func WithMaxEjected(share float64) BreakerOption {
	return breakerOptionFunc(func(c *breakerConfig) {
		if !(share > 0 && share <= 1) {
			c.bad("WithMaxEjected", "share", fmt.Sprintf("must be in (0, 1], got %v", share))
			return
		}
		c.share = share
	})
}

// WithConsecutiveFailures sets how many consecutive failures trip a
// breaker whose Settings have no ReadyToTrip. Default
// DefaultConsecutiveFailures (5). n must be in [1, math.MaxUint32]
// (gobreaker counts in a uint32).
func WithConsecutiveFailures(n int) BreakerOption {
	return breakerOptionFunc(func(c *breakerConfig) {
		if n <= 0 || uint64(n) > math.MaxUint32 { // uint64: an int may be 32 bits
			c.bad("WithConsecutiveFailures", "n", fmt.Sprintf("must be in [1, %d], got %d", uint32(math.MaxUint32), n))
			return
		}
		c.failures = uint32(n)
	})
}

// WithOpenTimeout sets how long a tripped breaker whose Settings have no
// Timeout stays open before it lets a probe through. Default
// DefaultOpenTimeout (30 s). d must be > 0.
func WithOpenTimeout(d time.Duration) BreakerOption {
	return breakerOptionFunc(func(c *breakerConfig) {
		if d <= 0 {
			c.bad("WithOpenTimeout", "d", fmt.Sprintf("must be > 0, got %v", d))
			return
		}
		c.timeout = d
	})
}

// WithBreakerClassifier sets which errors count as failures for the
// breakers whose Settings have no IsSuccessful: a provider that answers
// with a business error is up. Behind a failback invoker, pass the same
// classifier as its WithRetryable (failback.DefaultRetryable by default),
// so that what the breaker counts as "down" is what failback retries.
// Default: DefaultBreakerFailure. A nil failure is a *rebound.ArgumentError.
func WithBreakerClassifier(failure func(error) bool) BreakerOption {
	return breakerOptionFunc(func(c *breakerConfig) {
		if failure == nil {
			c.bad("WithBreakerClassifier", "failure", "must not be nil: it reports whether an error means the provider failed")
			return
		}
		c.failure = failure
	})
}

// WithBreakerObserver adds o as an observer of the breakers' state
// changes (see BreakerHooks, the typed adapter). Several add up; a nil o
// is ignored. Default: none.
func WithBreakerObserver(o rebound.Observer) BreakerOption {
	if rebound.IsNilObserver(o) {
		return nil
	}
	return breakerOptionFunc(func(c *breakerConfig) { c.obs = append(c.obs, o) })
}

// WithBreakerLogger sets the logger for state changes (Info for open and
// closed, Debug for half-open) and hook panics (Error). Default: none. A
// nil l is ignored. Credentials in targets are scrubbed (logging.Redacted).
func WithBreakerLogger(l *zap.Logger) BreakerOption {
	return breakerOptionFunc(func(c *breakerConfig) {
		if l != nil {
			c.logger = logging.Redacted(l)
		}
	})
}

// WithBreakerMeterProvider records rebound.breaker.targets{state} (the
// directory's breakers per state: closed, half_open, open) and
// rebound.breaker.transitions{state} (state changes, by the state
// entered), both observable: read from atomics when the reader collects,
// so calls record nothing. Close unregisters them. Default (and nil): no
// metrics.
func WithBreakerMeterProvider(mp metric.MeterProvider) BreakerOption {
	return breakerOptionFunc(func(c *breakerConfig) { c.mp = mp })
}

// DefaultBreakerFailure is the classifier of WithBreakerClassifier's
// default: an error counts as a failure of the provider when it is marked
// rebound.Transient, is context.DeadlineExceeded (the attempt's own
// timeout), io.ErrUnexpectedEOF, net.ErrClosed or a net.Error (syscall
// errors such as ECONNREFUSED included); nil, rebound.Permanent,
// context.Canceled (the caller gave up) and every other error (a business
// answer) do not.
func DefaultBreakerFailure(err error) bool {
	switch {
	case err == nil, rebound.IsPermanent(err), errors.Is(err, context.Canceled):
		return false
	case rebound.IsTransient(err), errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed):
		return true
	}
	_, ok := errors.AsType[net.Error](err)
	return ok
}

// BreakerDirectory decorates a Directory with a circuit breaker per target
// (github.com/sony/gobreaker/v2), like Envoy's outlier detection: List
// leaves out the targets whose breaker is open, within a share of the
// targets (WithMaxEjected), and returns invokers that count each call's
// outcome in their target's breaker.
//
//   - A breaker trips after WithConsecutiveFailures failures in a row (or
//     its Settings' ReadyToTrip), and its target is out of selection for
//     the open timeout.
//   - Then it is half-open: the target is listed again until it has taken
//     MaxRequests probes (1 by default: one call, not a burst); a probe
//     that fails opens the breaker again, MaxRequests successes close it.
//   - A target that leaves the inner directory's list drops its breaker;
//     one that comes back starts closed.
//
// Which errors are failures: WithBreakerClassifier (a business error is
// not the provider being down).
//
// List keeps its last answer while neither the inner list nor any breaker
// has changed and no open timeout has ended: then it costs the inner List
// and a few atomic loads, and does not allocate; an invoker it returns
// adds gobreaker's Execute (two short mutex sections, no allocation) to
// each call. List returns the invokers in the inner list's order and the
// caller must not modify the slice.
//
// Use one BreakerDirectory per service (per inner Directory). Create it
// with NewBreakerDirectory; the zero value is not usable. All methods are
// safe for concurrent use.
type BreakerDirectory struct {
	dir Directory
	cfg breakerConfig
	log *zap.Logger

	gen  atomic.Uint64 // bumped by every change a List answer depends on
	view atomic.Pointer[breakerView]

	mu      sync.Mutex // serialises rebuilds; guards members
	members map[string]*breakerMember

	evMu       sync.Mutex // guards events, delivering, states, transitions; never held while calling out
	events     []queuedEvent
	pending    atomic.Bool
	delivering bool
	states     [3]int64
	trans      [3]int64

	metrics *telemetry.Breaker
}

type queuedEvent struct {
	ev   BreakerEvent
	user func(string, gobreaker.State, gobreaker.State) // the Settings' OnStateChange
}

type breakerView struct {
	src   *Invoker // &inner[0]: the identity of the inner list
	n     int
	gen   uint64
	check int64 // UnixNano from which the answer is stale (an open timeout ends); MaxInt64 if none
	out   []Invoker
	err   error
}

// breakerState is one target's breaker; it outlives a member whose
// invoker was replaced by the inner directory (same target, new invoker).
type breakerState struct {
	d       *BreakerDirectory
	target  string
	cb      *gobreaker.CircuitBreaker[any]
	maxReq  uint32
	timeout time.Duration
	user    func(string, gobreaker.State, gobreaker.State)

	state   atomic.Int32 // gobreaker.State, mirrored by onStateChange
	since   atomic.Int64 // UnixNano
	until   atomic.Int64 // UnixNano of the end of the open timeout; 0 unless open
	opened  atomic.Int64 // UnixNano of the last closed -> open change (the outage's start); kept while open or half-open
	ejected atomic.Bool
	gone    bool // dropped; guarded by d.evMu
}

type breakerMember struct {
	b       *breakerState
	inv     Invoker
	guarded breakerInvoker
	forced  breakerInvoker
}

// breakerInvoker is the Invoker List returns for a target: guarded calls
// go through the breaker; forced ones (an open breaker beyond the
// ejection share) go through it when it admits them and straight to the
// target when it does not.
type breakerInvoker struct {
	m      *breakerMember
	forced bool
}

// NewBreakerDirectory returns dir with a breaker per target. It returns a
// *rebound.ArgumentError (matching rebound.ErrInvalidArgument) naming the
// option and its rule for a nil dir or a bad option; nil options are
// ignored. Defaults: gobreaker.Settings{} per target, trip after 5
// consecutive failures, open for 30 s, 1 probe when half-open, at most
// half of the targets out at once, DefaultBreakerFailure, no hooks, no
// logging, no metrics.
func NewBreakerDirectory(dir Directory, opts ...BreakerOption) (*BreakerDirectory, error) {
	cfg := breakerConfig{
		settings: func(string) gobreaker.Settings { return gobreaker.Settings{} },
		share:    DefaultMaxEjected,
		failures: DefaultConsecutiveFailures,
		timeout:  DefaultOpenTimeout,
		failure:  DefaultBreakerFailure,
		logger:   zap.NewNop(),
	}
	if dir == nil {
		cfg.bad("NewBreakerDirectory", "dir", "must not be nil: the Directory whose targets get breakers")
	}
	for _, o := range opts {
		if o != nil {
			o.applyBreaker(&cfg)
		}
	}
	if len(cfg.errs) > 0 {
		return nil, errors.Join(cfg.errs...)
	}
	d := &BreakerDirectory{dir: dir, cfg: cfg, members: map[string]*breakerMember{},
		log: cfg.logger.With(zap.String("component", "cluster.breaker"))}
	m, err := telemetry.NewBreaker(cfg.mp, d.counts)
	if err != nil {
		return nil, fmt.Errorf("cluster.NewBreakerDirectory: WithBreakerMeterProvider: %w", err)
	}
	d.metrics = m
	return d, nil
}

// Close unregisters the metrics (WithBreakerMeterProvider). It does not
// close the inner Directory. The directory stays usable.
func (d *BreakerDirectory) Close() error { return d.metrics.Close() }

// List lists the inner directory's invokers whose breaker admits a call,
// wrapped so that each call's outcome counts in its breaker; see
// BreakerDirectory. It returns the inner directory's error unchanged, and
// a *BreakerOpenError when every target is out of selection.
func (d *BreakerDirectory) List(ctx context.Context, inv *Invocation) ([]Invoker, error) {
	inner, err := d.dir.List(ctx, inv)
	if err != nil {
		return nil, err
	}
	if len(inner) == 0 {
		return nil, ErrNoInvokers
	}
	if v := d.view.Load(); v != nil && v.gen == d.gen.Load() && v.src == &inner[0] && v.n == len(inner) &&
		(v.check == math.MaxInt64 || time.Now().UnixNano() < v.check) {
		return v.out, v.err
	}
	v := d.rebuild(inner)
	d.deliver()
	return v.out, v.err
}

// rebuild computes the answer of List for inner and stores it.
func (d *BreakerDirectory) rebuild(inner []Invoker) *breakerView {
	d.mu.Lock()
	defer d.mu.Unlock()
	gen := d.gen.Load()
	if v := d.view.Load(); v != nil && v.src == &inner[0] && v.n == len(inner) {
		// Same list: only the states moved.
	} else {
		d.syncMembers(inner)
		gen = d.gen.Load()
	}
	now := time.Now()
	nowNs := now.UnixNano()
	type cand struct {
		m     *breakerMember
		since int64 // when its outage began (the breaker's last closed -> open): the first opened stay out
	}
	var (
		admitted = make(map[*breakerMember]bool, len(inner))
		ejected  []cand
		listed   int
		use      = make([]*breakerMember, len(inner)) // the member of each listed entry; nil for a nil or duplicate one
		seen     = make(map[string]bool, len(inner))
	)
	for i, iv := range inner {
		if iv == nil {
			continue
		}
		tg := iv.Target()
		m := d.members[tg]
		if m == nil || seen[tg] { // a duplicate target: the first one counts (as in syncMembers)
			continue
		}
		seen[tg] = true
		use[i] = m
		listed++
		b := m.b
		st := gobreaker.State(b.state.Load())
		if st == gobreaker.StateOpen && nowNs > b.until.Load() {
			st = b.cb.State() // let gobreaker move it to half-open
		}
		switch st {
		case gobreaker.StateClosed:
			admitted[m] = true
		case gobreaker.StateHalfOpen:
			if c := b.cb.Counts(); c.Requests-min(c.Requests, c.TotalExclusions) < b.maxReq { // gobreaker's own rule
				admitted[m] = true
			} else {
				ejected = append(ejected, cand{m, b.opened.Load()})
			}
		default:
			ejected = append(ejected, cand{m, b.opened.Load()})
		}
	}
	maxOut := int(math.Floor(d.cfg.share*float64(listed) + 1e-9))
	slices.SortStableFunc(ejected, func(a, b cand) int {
		switch {
		case a.since < b.since:
			return -1
		case a.since > b.since:
			return 1
		}
		return 0
	})
	out := make([]Invoker, 0, listed)
	forced := map[*breakerMember]bool{}
	for i, c := range ejected {
		if i >= maxOut {
			forced[c.m] = true
		}
	}
	check := int64(math.MaxInt64)
	var until int64 = math.MaxInt64
	for _, c := range ejected {
		if u := c.m.b.until.Load(); u != 0 && u < until {
			until = u
		}
	}
	for _, m := range use {
		if m == nil {
			continue
		}
		switch {
		case admitted[m]:
			m.b.ejected.Store(false)
			out = append(out, &m.guarded)
		case forced[m]:
			m.b.ejected.Store(false)
			out = append(out, &m.forced)
		default:
			m.b.ejected.Store(true)
		}
		if u := m.b.until.Load(); u != 0 && u+1 < check {
			check = u + 1
		}
	}
	v := &breakerView{src: &inner[0], n: len(inner), gen: gen, check: check, out: out}
	if len(out) == 0 {
		if until == math.MaxInt64 { // only half-open breakers with their probes out: look again soon
			until = nowNs + int64(d.probeRecheck())
			// and answer anew then, so that the Until a caller waits for
			// is never in the past while a probe takes long
			v.check = min(v.check, until+1)
		}
		v.err = &BreakerOpenError{Until: time.Unix(0, until+1)}
		v.out = nil
	}
	d.view.Store(v)
	return v
}

// probeRecheck is how soon a List that found every target half-open with
// its probes taken expects a change: a sixteenth of the shortest open
// timeout, at least 10 ms.
func (d *BreakerDirectory) probeRecheck() time.Duration {
	t := d.cfg.timeout
	for _, m := range d.members {
		t = min(t, m.b.timeout)
	}
	return max(t/16, 10*time.Millisecond)
}

// syncMembers makes members match inner (d.mu held): new targets get a
// closed breaker, gone ones drop theirs, a target whose invoker changed
// keeps its breaker.
func (d *BreakerDirectory) syncMembers(inner []Invoker) {
	seen := make(map[string]bool, len(inner))
	for _, iv := range inner {
		if iv == nil {
			continue
		}
		tg := iv.Target()
		if seen[tg] {
			continue
		}
		seen[tg] = true
		m := d.members[tg]
		switch {
		case m == nil:
			m = &breakerMember{b: d.newBreaker(tg), inv: iv}
		case !sameInvoker(m.inv, iv):
			m = &breakerMember{b: m.b, inv: iv}
		default:
			continue
		}
		m.guarded = breakerInvoker{m: m}
		m.forced = breakerInvoker{m: m, forced: true}
		d.members[tg] = m
	}
	for tg, m := range d.members {
		if !seen[tg] {
			delete(d.members, tg)
			d.evMu.Lock()
			m.b.gone = true
			d.states[m.b.state.Load()]--
			d.evMu.Unlock()
		}
	}
	d.gen.Add(1)
}

func (d *BreakerDirectory) newBreaker(target string) *breakerState {
	st := d.cfg.settings(target)
	b := &breakerState{d: d, target: target, user: st.OnStateChange}
	if st.Name == "" {
		st.Name = target
	}
	if st.ReadyToTrip == nil {
		n := d.cfg.failures
		st.ReadyToTrip = func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= n }
	}
	if st.Timeout <= 0 {
		st.Timeout = d.cfg.timeout
	}
	if st.IsSuccessful == nil {
		failure := d.cfg.failure
		st.IsSuccessful = func(err error) bool { return !failure(err) }
	}
	b.maxReq = max(st.MaxRequests, 1)
	b.timeout = st.Timeout
	st.OnStateChange = b.onStateChange
	b.since.Store(time.Now().UnixNano())
	d.evMu.Lock()
	d.states[gobreaker.StateClosed]++
	d.evMu.Unlock()
	b.cb = gobreaker.NewCircuitBreaker[any](st)
	return b
}

// onStateChange runs under gobreaker's mutex: it updates the mirror and
// queues the event; deliver reports it after gobreaker returns.
func (b *breakerState) onStateChange(_ string, from, to gobreaker.State) {
	now := time.Now()
	d := b.d
	d.evMu.Lock() // the mirror and the counts change together (see syncMembers)
	b.state.Store(int32(to))
	b.since.Store(now.UnixNano())
	if to == gobreaker.StateOpen {
		b.until.Store(now.Add(b.timeout).UnixNano())
		if from == gobreaker.StateClosed {
			b.opened.Store(now.UnixNano())
		}
	} else {
		b.until.Store(0)
	}
	if !b.gone {
		d.states[from]--
		d.states[to]++
		d.trans[to]++
		d.events = append(d.events, queuedEvent{BreakerEvent{Target: b.target, From: from, To: to, At: now}, b.user})
		d.pending.Store(true)
	}
	d.evMu.Unlock()
	d.gen.Add(1)
}

// deliver reports the queued state changes, one at a time, from the
// calling goroutine, with no lock held; a goroutine that finds another
// delivering leaves its events to it.
func (d *BreakerDirectory) deliver() {
	if !d.pending.Load() {
		return
	}
	d.evMu.Lock()
	if d.delivering {
		d.evMu.Unlock()
		return
	}
	d.delivering = true
	for len(d.events) > 0 {
		q := d.events[0]
		d.events[0] = queuedEvent{}
		d.events = d.events[1:]
		d.evMu.Unlock()
		d.report(q.ev, q.user)
		d.evMu.Lock()
	}
	d.events = nil
	d.pending.Store(false)
	d.delivering = false
	d.evMu.Unlock()
}

func (d *BreakerDirectory) report(ev BreakerEvent, user func(string, gobreaker.State, gobreaker.State)) {
	switch ev.To {
	case gobreaker.StateHalfOpen:
		d.log.Debug("cluster: breaker half-open: one probe may go", zap.String("target", ev.Target))
	case gobreaker.StateOpen:
		d.log.Info("cluster: breaker opened: target out of selection", zap.String("target", ev.Target), zap.Stringer("from", ev.From))
	default:
		d.log.Info("cluster: breaker closed: target back in selection", zap.String("target", ev.Target))
	}
	if user != nil {
		d.safeCall("gobreaker.Settings.OnStateChange", func() { user(ev.Target, ev.From, ev.To) })
	}
	if len(d.cfg.obs) > 0 {
		e := rebound.Event{Kind: rebound.EventStateChanged, Detail: ev}
		for _, o := range d.cfg.obs {
			d.safeCall("cluster breaker observer", func() { o.Observe(e) })
		}
	}
}

func (d *BreakerDirectory) safeCall(op string, fn func()) {
	defer func() {
		if r := recover(); r != nil {
			pe := NewPanicError(op, r)
			d.log.Error("cluster: recovered a panic", zap.String("op", op), zap.Any("panic", r), zap.ByteString("stack", pe.Stack))
		}
	}()
	fn()
}

// Breakers returns the state of every listed target's breaker, in no
// particular order: the accessor for a status page (which should show at
// least the open ones, with Since and Until).
func (d *BreakerDirectory) Breakers() []BreakerStatus {
	d.mu.Lock()
	out := make([]BreakerStatus, 0, len(d.members))
	for _, m := range d.members {
		b := m.b
		st := b.cb.State()
		s := BreakerStatus{Target: b.target, State: st, Since: time.Unix(0, b.since.Load()),
			Ejected: b.ejected.Load(), Counts: b.cb.Counts()}
		if u := b.until.Load(); u != 0 && st == gobreaker.StateOpen {
			s.Until = time.Unix(0, u)
		}
		out = append(out, s)
	}
	d.mu.Unlock()
	d.deliver()
	slices.SortFunc(out, func(a, b BreakerStatus) int {
		switch {
		case a.Target < b.Target:
			return -1
		case a.Target > b.Target:
			return 1
		}
		return 0
	})
	return out
}

// Open returns the breakers that are not closed (open or half-open), by
// target, with since when: what a status page lists.
func (d *BreakerDirectory) Open() []BreakerStatus {
	all := d.Breakers()
	out := all[:0]
	for _, s := range all {
		if s.State != gobreaker.StateClosed {
			out = append(out, s)
		}
	}
	return out
}

func (d *BreakerDirectory) counts() telemetry.BreakerCounts {
	d.evMu.Lock()
	defer d.evMu.Unlock()
	return telemetry.BreakerCounts{States: d.states, Transitions: d.trans}
}

// Target returns the inner invoker's Target.
func (bi *breakerInvoker) Target() string { return bi.m.b.target }

// Invoke calls the target through its breaker: a refused call returns a
// *BreakerOpenError without reaching the target (or, for a target beyond
// the ejection share, reaches it without the breaker).
func (bi *breakerInvoker) Invoke(ctx context.Context, inv *Invocation) (any, error) {
	m := bi.m
	b := m.b
	ran, half := false, false
	res, err := b.cb.Execute(func() (any, error) {
		ran = true
		// Admitted: a lazy open -> half-open change has been mirrored by
		// now. A probe was taken: List must look again, before the call
		// and after it (an excluded outcome changes no state).
		if half = gobreaker.State(b.state.Load()) == gobreaker.StateHalfOpen; half {
			b.d.gen.Add(1)
		}
		return m.inv.Invoke(ctx, inv)
	})
	if half {
		b.d.gen.Add(1)
	}
	b.d.deliver()
	if ran {
		return res, err
	}
	if bi.forced {
		return m.inv.Invoke(ctx, inv)
	}
	until := time.Now()
	if u := b.until.Load(); u != 0 {
		until = time.Unix(0, u+1)
	}
	return nil, &BreakerOpenError{Target: b.target, Until: until, Err: err}
}

// sameInvoker reports whether a and b are the same invoker. Invokers that
// cannot be compared (a type that is not comparable, or a comparable type
// whose == panics, such as an interface field holding a slice) are never
// the same: the member then takes the new invoker and keeps its breaker,
// so calls reach what the inner directory lists now.
func sameInvoker(a, b Invoker) (same bool) {
	ta, tb := reflect.TypeOf(a), reflect.TypeOf(b)
	if ta != tb || !ta.Comparable() {
		return false
	}
	defer func() {
		if recover() != nil {
			same = false
		}
	}()
	return a == b
}

var (
	_ Directory = (*BreakerDirectory)(nil)
	_ Invoker   = (*breakerInvoker)(nil)
)
