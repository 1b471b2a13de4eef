// Package telemetry holds rebound's OpenTelemetry instruments: the one
// table of names, units and attributes, and the small recorders the public
// packages embed behind their WithMeterProvider options.
//
// Nothing here is global and nothing runs in init(): every recorder is
// built from the metric.MeterProvider its owner was given, and a nil
// provider yields a nil recorder whose methods do nothing (the default,
// no-op path costs a nil check).
//
// Counts on hot paths (retry attempts, failback outcomes) are kept in
// atomics and reported by an observable counter's callback when the
// reader collects, so recording costs one atomic add and no allocation,
// whatever the SDK.
//
// # Instruments
//
// Meter (instrumentation scope): "github.com/rebound-go/rebound".
//
//	name                                  kind                         unit            attributes
//	rebound.retry.attempts                counter (observable)         {attempt}       outcome=success|retry|gave_up|throttled, component
//	rebound.retry.delay                   histogram                    s               component
//	rebound.limiter.wait                  histogram                    s               component
//	rebound.subscriber.subscriptions      updowncounter (observable)   {subscription}  state=pending|subscribed|retrying|held|stopped
//	rebound.subscriber.updates            counter                      {update}        result=delivered|duplicate|empty_held|stale
//	rebound.subscriber.confirmations      counter                      {confirmation}  reason=subscribe|evidence
//	rebound.subscriber.registry.connected updowncounter (observable)   {connection}    (none)
//	rebound.failback.queue                updowncounter (observable)   {call}          (none)
//	rebound.failback.calls                counter (observable)         {call}          outcome=succeeded|gave_up|dropped
//	rebound.grpc.subscriptions            updowncounter (observable)   {subscription}  (none)
//	rebound.grpc.resolvers                updowncounter (observable)   {resolver}      (none)
//	rebound.grpc.resolve_now              counter (observable)         {call}          result=refreshed|coalesced
//	rebound.grpc.rejected_states          counter (observable)         {state}         (none)
//	rebound.breaker.targets               updowncounter (observable)   {target}        state=closed|half_open|open
//	rebound.breaker.transitions           counter (observable)         {transition}    state (the state entered)
//	rebound.registration.registrations    updowncounter (observable)   {registration}  registry, state=registering|registered|repairing|deregistering|stopped
//	rebound.registration.requests         counter (observable)         {request}       registry, op=register|check|update|deregister, result=success|failure
//	rebound.registration.repairs          counter (observable)         {repair}        registry
//
// The "current number" instruments are observable up-down counters, not
// gauges, because they add up: two Managers on one MeterProvider report
// the sum of their subscriptions per state, of their connected registry
// clients (1 each while connected) and two Invokers the sum of their
// queues (calls waiting for or running a retry).
//
// The failback instruments are read from failback.Invoker.Stats when the
// reader collects: they cost the call path nothing.
//
// rebound.retry.attempts counts every attempt a retry loop made: success
// (the attempt succeeded), retry (it failed and another follows after
// rebound.retry.delay), gave_up (it failed and the loop stopped: a
// permanent error, the policy exhausted or the context done).
// rebound.limiter.wait is the time an attempt waited for the shared
// limiter on top of the delay. component names the loop's owner
// ("subscriber", "failback", "reboundgrpc", or what the user set); it is
// omitted when empty.
//
// rebound.subscriber.confirmations counts evidence that the registry holds
// a subscription: reason=subscribe for an acknowledged Registry.Subscribe,
// reason=evidence for the adapter's Sink.Confirmed (a push, a cache
// refresh). The adapter's own words are free text and never an attribute
// value.
//
// Every attribute value comes from a fixed set (attributes.go, Values):
// OpenTelemetry's rule of bounded cardinality.
package telemetry

import (
	"context"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// ScopeName is the instrumentation scope of every rebound instrument.
const ScopeName = "github.com/rebound-go/rebound"

// Instrument names.
const (
	RetryAttempts           = "rebound.retry.attempts"
	RetryDelay              = "rebound.retry.delay"
	LimiterWait             = "rebound.limiter.wait"
	SubscriberSubscriptions = "rebound.subscriber.subscriptions"
	SubscriberUpdates       = "rebound.subscriber.updates"
	SubscriberConfirmations = "rebound.subscriber.confirmations"
	SubscriberConnected     = "rebound.subscriber.registry.connected"
	FailbackQueue           = "rebound.failback.queue"
	FailbackCalls           = "rebound.failback.calls"
)

// delayBuckets are the histogram boundaries of delays and waits, in
// seconds: from 1 ms to 5 min.
var delayBuckets = []float64{0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}

func meter(mp metric.MeterProvider) metric.Meter { return mp.Meter(ScopeName) }

// Outcome of a retry attempt.
type Outcome int

// Retry attempt outcomes.
const (
	OutcomeSuccess Outcome = iota
	OutcomeRetry
	OutcomeGaveUp
	OutcomeThrottled
	numOutcomes
)

var outcomeNames = [numOutcomes]string{OutcomeSuccessValue, OutcomeRetryValue, OutcomeGaveUpValue, OutcomeThrottledValue}

// Retry records a retry loop's attempts, delays and limiter waits. A nil
// *Retry records nothing. Safe for concurrent use.
type Retry struct {
	attempts [numOutcomes]atomic.Int64
	delay    metric.Float64Histogram
	wait     metric.Float64Histogram
	opts     []metric.RecordOption // the component attribute, or none
	reg      metric.Registration
}

// NewRetry returns a Retry on mp's rebound meter, its measurements
// carrying attrs (for example component=subscriber). A nil mp returns nil,
// nil.
func NewRetry(mp metric.MeterProvider, attrs ...attribute.KeyValue) (*Retry, error) {
	if mp == nil {
		return nil, nil
	}
	m := meter(mp)
	r := &Retry{}
	comp := attrs
	if len(comp) > 0 {
		r.opts = []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(comp...))}
	}
	var err error
	if r.delay, err = m.Float64Histogram(RetryDelay, metric.WithUnit("s"),
		metric.WithDescription("Delay before the next attempt of a retry loop."),
		metric.WithExplicitBucketBoundaries(delayBuckets...)); err != nil {
		return nil, err
	}
	if r.wait, err = m.Float64Histogram(LimiterWait, metric.WithUnit("s"),
		metric.WithDescription("Time an attempt waited for the shared retry limiter, on top of its delay."),
		metric.WithExplicitBucketBoundaries(delayBuckets...)); err != nil {
		return nil, err
	}
	attempts, err := m.Int64ObservableCounter(RetryAttempts, metric.WithUnit("{attempt}"),
		metric.WithDescription("Attempts made by retry loops, by outcome: success, retry (another attempt follows), gave_up (the loop stopped), throttled (rejected locally by the adaptive throttle, not sent)."))
	if err != nil {
		return nil, err
	}
	var obs [numOutcomes]metric.ObserveOption
	for o := range numOutcomes {
		obs[o] = metric.WithAttributeSet(attribute.NewSet(append([]attribute.KeyValue{
			attribute.String(AttrOutcome, outcomeNames[o])}, comp...)...))
	}
	r.reg, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		for i := range numOutcomes {
			o.ObserveInt64(attempts, r.attempts[i].Load(), obs[i])
		}
		return nil
	}, attempts)
	if err != nil {
		return nil, err
	}
	return r, nil
}

// Attempt counts one attempt with outcome o.
func (r *Retry) Attempt(o Outcome) {
	if r != nil {
		r.attempts[o].Add(1)
	}
}

// Delay records the delay before the next attempt.
func (r *Retry) Delay(ctx context.Context, d time.Duration) {
	if r != nil {
		r.delay.Record(ctx, d.Seconds(), r.opts...)
	}
}

// LimiterWait records a wait for the shared limiter.
func (r *Retry) LimiterWait(ctx context.Context, d time.Duration) {
	if r != nil {
		r.wait.Record(ctx, d.Seconds(), r.opts...)
	}
}

// The three hook forms, for the observer built by the package that owns
// the loop (this package cannot import rebound): Attempted(e.Err,
// e.LimiterWait) on EventAttempt, Retried(e.Delay) on EventRetry, GaveUp()
// on EventGiveUp.

// Attempted records an attempt's end: a success counts, a failure is
// counted by Retried or GaveUp; a limiter wait before it is recorded.
func (r *Retry) Attempted(err error, limiterWait time.Duration) {
	if r == nil {
		return
	}
	if err == nil {
		r.attempts[OutcomeSuccess].Add(1)
	}
	if limiterWait > 0 {
		r.wait.Record(context.Background(), limiterWait.Seconds(), r.opts...)
	}
}

// Succeeded records a successful attempt with no limiter wait: Attempted's
// fast path.
func (r *Retry) Succeeded() {
	if r != nil {
		r.attempts[OutcomeSuccess].Add(1)
	}
}

// Retried records a failed attempt that another follows after delay.
func (r *Retry) Retried(delay time.Duration) {
	if r == nil {
		return
	}
	r.attempts[OutcomeRetry].Add(1)
	r.delay.Record(context.Background(), delay.Seconds(), r.opts...)
}

// GaveUp records a failed attempt that ended its loop.
func (r *Retry) GaveUp() {
	if r != nil {
		r.attempts[OutcomeGaveUp].Add(1)
	}
}

// Throttled records an attempt the adaptive throttle rejected locally (it
// was not sent; the loop backs off and tries again, or gives up).
func (r *Retry) Throttled() {
	if r != nil {
		r.attempts[OutcomeThrottled].Add(1)
	}
}

// Close unregisters the callback of rebound.retry.attempts.
func (r *Retry) Close() error {
	if r == nil || r.reg == nil {
		return nil
	}
	return r.reg.Unregister()
}

// SubscriberCounts is what a subscriber.Manager reports when the reader
// collects.
type SubscriberCounts struct {
	// States counts subscriptions by state: pending, subscribed, retrying,
	// stopped (those the Manager still retains), held (subscribed, an empty
	// list held back).
	States [5]int64
	// Connected is 1 while the registry client reports a connection, 0
	// while it reports none, -1 if it reports nothing (not reported).
	Connected int64
}

var stateNames = [5]string{StatePending, StateSubscribed, StateRetrying, StateStopped, StateHeld}

// Subscriber records a subscriber.Manager's instruments. A nil *Subscriber
// records nothing. Safe for concurrent use.
type Subscriber struct {
	updates  metric.Int64Counter
	updOpts  [numUpdates][]metric.AddOption
	confirms metric.Int64Counter
	confOpts [numConfirms][]metric.AddOption
	reg      metric.Registration
}

// Update results.
type Update int

// Results of a list the registry handed over.
const (
	UpdateDelivered Update = iota // passed to the listener
	UpdateDuplicate               // same list as the last one: dropped
	UpdateEmptyHeld               // an empty list held back (last-known-good kept)
	UpdateStale                   // replaced by a newer one before delivery
	numUpdates
)

var updateNames = [numUpdates]string{ResultDelivered, ResultDuplicate, ResultEmptyHeld, ResultStale}

// Confirm is what confirmed a subscription: the reason attribute of
// rebound.subscriber.confirmations. The adapter's own words for its
// evidence ("push", "SDK cache refreshed from the server after the
// reconnect") are free text: they go to Status.ConfirmReason, the
// Confirmation hook and the logs, never to an attribute.
type Confirm int

// Confirmation reasons.
const (
	ConfirmSubscribe Confirm = iota // an acknowledged Registry.Subscribe
	ConfirmEvidence                 // the adapter's Sink.Confirmed (a push, a cache refresh, a watch's progress)
	numConfirms
)

var confirmNames = [numConfirms]string{ReasonSubscribe, ReasonEvidence}

// NewSubscriber returns a Subscriber on mp's rebound meter; counts is
// called each time the reader collects. A nil mp returns nil, nil.
func NewSubscriber(mp metric.MeterProvider, counts func() SubscriberCounts) (*Subscriber, error) {
	if mp == nil {
		return nil, nil
	}
	m := meter(mp)
	s := &Subscriber{}
	var err error
	if s.updates, err = m.Int64Counter(SubscriberUpdates, metric.WithUnit("{update}"),
		metric.WithDescription("Instance lists the registry handed over, by result: delivered, duplicate, empty_held, stale.")); err != nil {
		return nil, err
	}
	for u := range numUpdates {
		s.updOpts[u] = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(attribute.String(AttrResult, updateNames[u])))}
	}
	if s.confirms, err = m.Int64Counter(SubscriberConfirmations, metric.WithUnit("{confirmation}"),
		metric.WithDescription("Evidence that the registry holds a subscription, by reason: subscribe (an acknowledged subscribe) or evidence (the adapter's report: a push, a cache refresh).")); err != nil {
		return nil, err
	}
	for c := range numConfirms {
		s.confOpts[c] = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(attribute.String(AttrReason, confirmNames[c])))}
	}
	subs, err := m.Int64ObservableUpDownCounter(SubscriberSubscriptions, metric.WithUnit("{subscription}"),
		metric.WithDescription("Subscriptions by state: pending, subscribed, retrying, held, stopped (retained)."))
	if err != nil {
		return nil, err
	}
	conn, err := m.Int64ObservableUpDownCounter(SubscriberConnected, metric.WithUnit("{connection}"),
		metric.WithDescription("Registry clients connected: 1 per Manager while its registry client reports a connection."))
	if err != nil {
		return nil, err
	}
	var obs [len(stateNames)]metric.ObserveOption
	for i, n := range stateNames {
		obs[i] = metric.WithAttributeSet(attribute.NewSet(attribute.String(AttrState, n)))
	}
	s.reg, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		c := counts()
		for i := range stateNames {
			o.ObserveInt64(subs, c.States[i], obs[i])
		}
		if c.Connected >= 0 {
			o.ObserveInt64(conn, c.Connected)
		}
		return nil
	}, subs, conn)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// Updated counts one list with result u.
func (s *Subscriber) Updated(u Update) {
	if s != nil && u >= 0 && u < numUpdates {
		s.updates.Add(context.Background(), 1, s.updOpts[u]...)
	}
}

// Confirmed counts one confirmation of kind c.
func (s *Subscriber) Confirmed(c Confirm) {
	if s != nil && c >= 0 && c < numConfirms {
		s.confirms.Add(context.Background(), 1, s.confOpts[c]...)
	}
}

// Close unregisters the callbacks.
func (s *Subscriber) Close() error {
	if s == nil || s.reg == nil {
		return nil
	}
	return s.reg.Unregister()
}

// FailbackStats is what a failback.Invoker reports when the reader
// collects: its queue and its running totals of ended calls.
type FailbackStats struct {
	Queue                      int64
	Succeeded, GaveUp, Dropped int64
}

var callNames = [3]string{CallSucceeded, CallGaveUp, CallDropped}

// Failback reports a failback.Invoker's instruments, all observable: the
// call path records nothing. A nil *Failback does nothing.
type Failback struct{ reg metric.Registration }

// NewFailback registers rebound.failback.queue and rebound.failback.calls
// on mp's rebound meter; stats is called (concurrently with the Invoker's
// work) each time the reader collects. A nil mp returns nil, nil.
func NewFailback(mp metric.MeterProvider, stats func() FailbackStats) (*Failback, error) {
	if mp == nil {
		return nil, nil
	}
	m := meter(mp)
	q, err := m.Int64ObservableUpDownCounter(FailbackQueue, metric.WithUnit("{call}"),
		metric.WithDescription("Calls waiting for a retry (queued or running)."))
	if err != nil {
		return nil, err
	}
	calls, err := m.Int64ObservableCounter(FailbackCalls, metric.WithUnit("{call}"),
		metric.WithDescription("Calls handed to the background that ended, by outcome: succeeded, gave_up, dropped."))
	if err != nil {
		return nil, err
	}
	var obs [len(callNames)]metric.ObserveOption
	for i, n := range callNames {
		obs[i] = metric.WithAttributeSet(attribute.NewSet(attribute.String(AttrOutcome, n)))
	}
	reg, err := m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		st := stats()
		o.ObserveInt64(q, st.Queue)
		o.ObserveInt64(calls, st.Succeeded, obs[0])
		o.ObserveInt64(calls, st.GaveUp, obs[1])
		o.ObserveInt64(calls, st.Dropped, obs[2])
		return nil
	}, q, calls)
	if err != nil {
		return nil, err
	}
	return &Failback{reg: reg}, nil
}

// Close unregisters the callback.
func (f *Failback) Close() error {
	if f == nil || f.reg == nil {
		return nil
	}
	return f.reg.Unregister()
}
