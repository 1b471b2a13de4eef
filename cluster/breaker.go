package cluster

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sony/gobreaker/v2"
	"go.uber.org/zap"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/internal/sat"
	"github.com/rebound-go/rebound/internal/telemetry"
)

// BreakerDirectory decorates a Directory with a gobreaker circuit breaker
// per target. List leaves out the targets whose breaker is open, within the
// WithMaxEjected share. Its invokers count each call's outcome.
//
// Closed, a breaker costs an atomic load per call: no lock, no clock read.
// Half-open, it admits MaxRequests probes. A target that leaves the inner
// list drops its breaker. docs/breaker.md has the rules.
//
// Use one per service, made by NewBreakerDirectory. Its methods are safe
// for concurrent use.
type BreakerDirectory struct {
	dir   Directory
	cfg   breakerConfig
	log   *zap.Logger
	epoch time.Time // the breakers' deadlines are monotonic durations since

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
	check int64 // monotonic ns (see mono) from which the answer is stale (an open timeout ends); MaxInt64 if none
	out   []Invoker
	err   error
}

// breakerState is one target's breaker; it outlives a member whose
// invoker was replaced by the inner directory (same target, new invoker).
type breakerState struct {
	d       *BreakerDirectory
	target  string
	core    breakerCore
	timeout time.Duration
	user    func(string, gobreaker.State, gobreaker.State)

	state   atomic.Int32 // gobreaker.State, mirrored by onStateChange
	since   atomic.Int64 // monotonic ns (see mono)
	until   atomic.Int64 // monotonic ns of the end of the open timeout; 0 unless open
	opened  atomic.Int64 // monotonic ns of the last closed -> open change (the outage's start); kept while open or half-open
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

// NewBreakerDirectory returns dir with a breaker per target. A nil dir or
// a bad option is a *rebound.ArgumentError naming it. By default a breaker
// trips after 5 consecutive failures and stays open 30 s. At most half the
// targets are out at once.
func NewBreakerDirectory(dir Directory, opts ...Option) (*BreakerDirectory, error) {
	cfg := breakerConfig{
		settings: func(string) gobreaker.Settings { return gobreaker.Settings{} },
		share:    defaultMaxEjected,
		failures: defaultConsecutiveFailures,
		timeout:  defaultOpenTimeout,
		failure:  defaultFailure,
		logger:   zap.NewNop(),
	}
	if dir == nil {
		cfg.bad("NewBreakerDirectory", "dir", "must not be nil: the Directory whose targets get breakers")
	}
	errs := applyOptions(&config{breaker: true, br: &cfg}, opts)
	if errs = append(errs, cfg.errs...); len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	d := &BreakerDirectory{dir: dir, cfg: cfg, members: map[string]*breakerMember{}, epoch: time.Now(),
		log: cfg.logger.With(zap.String("component", "cluster.breaker"))}
	m, err := telemetry.NewBreaker(cfg.mp, d.counts)
	if err != nil {
		return nil, fmt.Errorf("cluster.NewBreakerDirectory: WithBreakerSettings: rebound.WithMeterProvider: %w", err)
	}
	d.metrics = m
	return d, nil
}

// Close unregisters the metrics of WithBreakerSettings' meter. It does not
// close the inner Directory.
func (d *BreakerDirectory) Close() error { return d.metrics.Close() }

// List lists the inner invokers whose breaker admits a call. It returns the
// inner error unchanged. With every target out, it returns a
// *BreakerOpenError.
func (d *BreakerDirectory) List(ctx context.Context, inv *Invocation) ([]Invoker, error) {
	inner, err := d.dir.List(ctx, inv)
	if err != nil {
		return nil, err
	}
	if len(inner) == 0 {
		return nil, ErrNoInvokers
	}
	if v := d.view.Load(); v != nil && v.gen == d.gen.Load() && v.src == &inner[0] && v.n == len(inner) &&
		(v.check == math.MaxInt64 || d.mono() < v.check) {
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
	nowNs := d.mono()
	use, admitted, ejected := d.classify(inner, nowNs)
	listed := len(admitted) + len(ejected)
	maxOut := int(math.Floor(d.cfg.share*float64(listed) + 1e-9))
	slices.SortStableFunc(ejected, func(a, b ejectCand) int {
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
	probing := false // a half-open breaker with its probes out: it may close at any moment
	for _, c := range ejected {
		u := c.m.b.until.Load()
		probing = probing || u == 0
		if u != 0 && u <= until {
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
		if u := m.b.until.Load(); u != 0 && u < check {
			check = sat.Add(time.Duration(u), 1).Nanoseconds() // an open timeout of MaxInt64 never ends: never stale
		}
	}
	v := &breakerView{src: &inner[0], n: len(inner), gen: gen, check: check, out: out}
	if len(out) == 0 {
		if probing || len(ejected) == 0 { // a half-open breaker with its probes out (or no target at all): look again soon
			until = min(until, sat.Add(time.Duration(nowNs), d.probeRecheck()).Nanoseconds())
			// and answer anew then, so that the Until a caller waits for
			// is never in the past while a probe takes long
			v.check = min(v.check, sat.Add(time.Duration(until), 1).Nanoseconds())
		}
		v.err = &BreakerOpenError{Until: d.wall(sat.Add(time.Duration(until), 1))}
		v.out = nil
	}
	d.view.Store(v)
	return v
}

// ejectCand is a target List would leave out, with when its outage began
// (its breaker's last closed -> open): the first opened stay out.
type ejectCand struct {
	m     *breakerMember
	since int64
}

// classify sorts the members of inner (d.mu held): use is the member of
// each entry (nil for a nil or duplicate one), admitted the ones whose
// breaker admits a call, ejected the others.
func (d *BreakerDirectory) classify(inner []Invoker, nowNs int64) (use []*breakerMember, admitted map[*breakerMember]bool, ejected []ejectCand) {
	use = make([]*breakerMember, len(inner))
	admitted = make(map[*breakerMember]bool, len(inner))
	seen := make(map[string]bool, len(inner))
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
		b := m.b
		st := gobreaker.State(b.state.Load())
		if st == gobreaker.StateOpen && nowNs > b.until.Load() {
			st = b.core.State() // let the breaker move it to half-open
		}
		if st == gobreaker.StateClosed || st == gobreaker.StateHalfOpen && b.core.probeLeft() {
			admitted[m] = true
		} else {
			ejected = append(ejected, ejectCand{m, b.opened.Load()})
		}
	}
	return use, admitted, ejected
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
			m.b.core.stop()
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
	b.core.lazy = st.ReadyToTrip == nil
	b.core.nilOK = st.IsSuccessful == nil && st.IsExcluded == nil && !d.cfg.customFailure
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
	b.timeout = st.Timeout
	b.core.now = d.since
	b.core.changed = b.onStateChange
	b.since.Store(d.mono())
	d.evMu.Lock()
	d.states[gobreaker.StateClosed]++
	d.evMu.Unlock()
	b.core.init(st, d.cfg.maxOpen)
	return b
}

// onStateChange runs under the breaker's mutex: it updates the mirror and
// queues the event (now and until are monotonic); deliver reports it once
// the breaker's mutex is released.
func (b *breakerState) onStateChange(from, to gobreaker.State, now, until time.Duration) {
	d := b.d
	d.evMu.Lock() // the mirror and the counts change together (see syncMembers)
	b.state.Store(int32(to))
	b.since.Store(int64(now))
	if to == gobreaker.StateOpen {
		b.until.Store(int64(until))
		if from == gobreaker.StateClosed {
			b.opened.Store(int64(now))
		}
	} else {
		b.until.Store(0)
	}
	if !b.gone {
		d.states[from]--
		d.states[to]++
		d.trans[to]++
		d.events = append(d.events, queuedEvent{BreakerEvent{Target: b.target, From: from, To: to, At: wallNow()}, b.user})
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
			pe := newPanicError(op, r)
			d.log.Error("cluster: recovered a panic", zap.String("op", op), zap.Any("panic", r), zap.ByteString("stack", pe.Stack))
		}
	}()
	fn()
}

// breakers returns the state of every listed target's breaker, by
// target. Closed and lazy, Counts hold only the successes that ended a
// failure run (see breakerCore).
func (d *BreakerDirectory) breakers() []BreakerStatus {
	d.mu.Lock()
	out := make([]BreakerStatus, 0, len(d.members))
	for _, m := range d.members {
		b := m.b
		st := b.core.State()
		s := BreakerStatus{Target: b.target, State: st, Since: d.wall(time.Duration(b.since.Load())),
			Ejected: b.ejected.Load(), Counts: b.core.Counts()}
		if u := b.until.Load(); u != 0 && st == gobreaker.StateOpen {
			s.Until = d.wall(time.Duration(u))
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

// Open returns the breakers that are not closed, by target.
func (d *BreakerDirectory) Open() []BreakerStatus {
	all := d.breakers()
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
func (bi *breakerInvoker) Invoke(ctx context.Context, inv *Invocation) (res any, err error) {
	m := bi.m
	b := m.b
	a, refused := b.core.allow()
	if refused != nil {
		b.d.deliver() // the look may have moved an open breaker to half-open
		if bi.forced {
			return m.inv.Invoke(ctx, inv)
		}
		until := b.d.mono()
		if u := b.until.Load(); u != 0 {
			until = sat.Add(time.Duration(u), 1).Nanoseconds()
		}
		return nil, &BreakerOpenError{Target: b.target, Until: b.d.wall(time.Duration(until)), Err: refused}
	}
	if a.half { // a probe was taken: List must look again, before the call and after it
		b.d.gen.Add(1)
		b.d.deliver()
	}
	ended := false
	defer func() {
		if !ended { // a panic or runtime.Goexit: a failure, as in gobreaker's Execute
			r := recover()
			if r == nil { // runtime.Goexit (a nil panic is a *runtime.PanicNilError): let it go on
				b.core.done(a, errInvokerGoexit)
				b.d.deliver()
				return
			}
			b.core.done(a, fmt.Errorf("%v", r))
			b.d.deliver()
			panic(r)
		}
	}()
	res, err = m.inv.Invoke(ctx, inv)
	ended = true
	if err == nil && b.core.quietSuccess(a) {
		return res, err // closed, nothing to count: no state change, no event
	}
	b.core.done(a, err)
	if a.half {
		b.d.gen.Add(1)
	}
	b.d.deliver()
	return res, err
}

// errInvokerGoexit is the outcome counted for a call whose invoker ended
// its goroutine with runtime.Goexit.
var errInvokerGoexit = errors.New("cluster: the invoker called runtime.Goexit")

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

// mono is the time on the monotonic clock since the directory was made,
// in nanoseconds: what every deadline of its breakers is measured on.
func (d *BreakerDirectory) mono() int64 { return int64(time.Since(d.epoch)) }

func (d *BreakerDirectory) since() time.Duration { return time.Since(d.epoch) }

// wall is the time.Time of a monotonic instant: it keeps the epoch's
// monotonic reading (time.Until of it ignores wall-clock steps) and
// saturates in year 2262 for an open timeout that never ends.
func (d *BreakerDirectory) wall(mono time.Duration) time.Time { return sat.AddTime(d.epoch, mono) }

// wallNow reads the wall clock for the time an event is reported at: a
// seam for the tests that step it (no deadline is measured on it).
var wallNow = time.Now
