package failback

import (
	"context"
	"errors"
	"fmt"
	"github.com/rebound-go/rebound/internal/nilness"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/cluster"
	"github.com/rebound-go/rebound/internal/dueheap"
	"github.com/rebound-go/rebound/internal/goid"
	"github.com/rebound-go/rebound/internal/telemetry"
	"github.com/rebound-go/rebound/logging"
)

// Task describes a call handed to the background: the Detail of every
// rebound.Event the invoker emits (see Hooks for the kinds). It is a copy:
// keeping it is safe.
type Task struct {
	// Invocation is the call, as given to Invoke (shared, read only).
	Invocation *cluster.Invocation
	// Attempts counts the attempts made so far, the first one (in Invoke)
	// included: 1 in Queued, 2 after the first retry. A retry the throttle
	// (WithThrottle) rejected locally counts too, as a failed attempt that
	// was not sent (its Err is rebound.ErrThrottled).
	Attempts int
	// Target is the Target of the invoker of the last attempt, "" if none
	// was selected (for example an empty directory).
	Target string
	// Err is the last attempt's error: nil in Succeeded; a *GiveUpError in
	// GaveUp; a *RejectedError in Dropped for a call that was never queued;
	// rebound.ErrThrottled in Retried for a retry the throttle rejected
	// locally.
	Err error
	// Delay is the wait before the next attempt (Queued and Retried).
	Delay time.Duration
	// Age is the time since the first attempt failed.
	Age time.Duration
	// Reason says why the call was dropped (EventDropped only).
	Reason DropReason
}

// The invoker emits a rebound.Event, with Detail a Task, on the life
// events of calls handed to the background, to the observers of
// WithObserver: rebound.EventQueued, then one EventRetry per failed retry
// that is followed by another, and exactly one of EventRecovered (a retry
// succeeded), EventGiveUp (Err a *GiveUpError) or EventDropped (Task.Reason
// says why). The Event's Attempt, Err, Delay and Elapsed are the Task's
// Attempts, Err, Delay and Age. Hooks is the typed adapter: one function
// per kind.
//
// The events of one call are observed one at a time, in that order, never
// concurrently (those of different calls may be). A call that could not
// be queued gets only EventDropped. Close and Shutdown return only after
// every call's final event has been observed.
//
// Observers are called with no lock held, so they may call Stats. They
// must be safe for concurrent use and should return quickly: a slow
// observer holds up the goroutine that calls it, and nothing else: a
// caller of Invoke whose first attempt failed (EventQueued, and
// EventDropped for a call that could not be queued), a retry worker
// (EventRetry, EventRecovered, EventGiveUp, EventDropped: that worker runs
// no other retry meanwhile, so with WithConcurrency(n), n slow observers
// stall the retries), or Close (EventDropped of the calls still queued).
// A successful Invoke emits nothing. Wrap a slow observer in a
// rebound.Queue to stall none of them. An observer may call Close or
// Shutdown: called from an observer (which they would wait for), they
// start stopping the invoker and return rebound.ErrCalledFromCallback at
// once instead of deadlocking; the invoker finishes stopping in the
// background after the observer returns (a later Close or Shutdown from
// outside an observer waits for that end). An observer that panics is
// recovered and logged at Error; if the event was EventQueued or
// EventRetry, the call then ends with EventGiveUp (Reason ErrPanicked,
// Last a *PanicError); the process and the workers survive.
type Hooks struct {
	// Queued: the call's first attempt failed with a retryable error and it
	// was queued; Invoke returns (nil, nil). Called from the goroutine
	// calling Invoke, before the task can run (rebound.EventQueued).
	Queued func(Task)
	// Retried: a retry attempt failed with a retryable error and the next
	// one is scheduled after Delay. Called from a retry worker, before the
	// task can run again (rebound.EventRetry).
	Retried func(Task)
	// Succeeded: a retry attempt succeeded. Called from a retry worker
	// (rebound.EventRecovered).
	Succeeded func(Task)
	// GaveUp: the task stopped because of its own outcome: the policy is
	// exhausted, an error that is not retryable, or a panic; Err is a
	// *GiveUpError (rebound.EventGiveUp).
	GaveUp func(Task)
	// Dropped: the call will not be retried (any further) for a reason
	// other than its own outcome, Task.Reason (see DropReason); for a call
	// that was never queued, Err is the *RejectedError Invoke returns
	// (rebound.EventDropped). A call never queued is reported from the
	// goroutine calling Invoke; DropClosed for queued tasks from the
	// goroutine calling Close (or Shutdown), or from a background goroutine
	// if Close was called from an observer; otherwise from the retry
	// worker that held the task.
	Dropped func(Task)
}

// Observe calls the field for e's kind with e.Detail, if it is a Task.
func (h Hooks) Observe(e rebound.Event) {
	t, ok := e.Detail.(Task)
	if !ok {
		return
	}
	var fn func(Task)
	switch e.Kind {
	case rebound.EventQueued:
		fn = h.Queued
	case rebound.EventRetry:
		fn = h.Retried
	case rebound.EventRecovered:
		fn = h.Succeeded
	case rebound.EventGiveUp:
		fn = h.GaveUp
	case rebound.EventDropped:
		fn = h.Dropped
	}
	if fn != nil {
		fn(t)
	}
}

// Stats counts the calls handed to the background. Every call whose first
// attempt failed with a retryable error while retries were enabled is
// counted in Offered, and is at any moment in exactly one of the other
// buckets, so:
//
//	Offered == Queued + InFlight + Succeeded + GaveUp + sum(Dropped)
//
// (With WithStore, Offered also counts the calls New loaded from the store.)
//
// Calls that succeed on their first attempt, or fail with an error that is
// not retryable, are not counted.
type Stats struct {
	// Queued is the number of tasks waiting now, for their due time or for
	// a worker (or being reported to Hooks.Queued).
	Queued int
	// InFlight is the number of tasks held by a retry worker now: their
	// attempt is running or its outcome is being reported.
	InFlight int
	// Offered counts the calls whose first attempt failed with a retryable
	// error.
	Offered uint64
	// Retried counts retry attempts started (a task retried 3 times counts
	// 3).
	Retried uint64
	// Throttled counts retries the adaptive throttle (WithThrottle)
	// rejected locally: never sent (not in Retried), each one counted as a
	// failed attempt of its call, which was rescheduled (reported to
	// Hooks.Retried with Err rebound.ErrThrottled) or, when its policy ran
	// out, ended in GaveUp.
	Throttled uint64
	// BreakerWaits counts retries that waited for a circuit breaker
	// (a *cluster.BreakerOpenError: see "Circuit breakers" in the package
	// doc) instead of being attempted: never sent, not in Retried nor in
	// the task's Attempts.
	BreakerWaits uint64
	// Succeeded counts tasks that succeeded on a retry.
	Succeeded uint64
	// GaveUp counts tasks that stopped with an error (see Hooks.GaveUp).
	GaveUp uint64
	// Dropped counts calls dropped, by reason; it has an entry for every
	// DropReason.
	Dropped map[DropReason]uint64
	// Quarantined counts the stored calls New could not load and set aside
	// in the Store (WithQuarantine). They are not in Offered.
	Quarantined uint64
}

// state is the life stage of an Invoker.
type state int

const (
	stateOpen     state = iota
	stateDraining       // Shutdown began: no new calls, queued ones still retried
	stateClosed         // Close began: nothing runs any more
)

// Invoker is a failback cluster invoker: a call whose first attempt fails
// with a retryable error is queued and retried in the background, and the
// caller gets (nil, nil), as for a call that needs no answer (notifications,
// audit records, cache invalidations). Use it only for such calls.
//
// Retries are scheduled by due time on a min-heap served by one scheduler
// goroutine (one timer, set to the earliest due time; no polling) and run
// by a fixed pool of workers (WithConcurrency). Each task has its own
// jittered BackOff (WithPolicy), so calls that failed together do not retry
// together. Every retry lists the Directory again and avoids the invokers
// that already failed for the task.
//
// The caller always learns of a call that will not be retried: Invoke
// returns the error unless the call was queued, and a queued call ends in
// exactly one of the Succeeded, GaveUp or Dropped hooks and the matching
// Stats counter.
//
// An *Invoker is itself a cluster.Invoker (Target returns "failback").
// Create it with New; the zero value is not usable. All methods are safe
// for concurrent use. Shutdown drains and stops, Close stops at once; both
// stop the goroutines New starts.
type Invoker struct {
	dir cluster.Directory
	lb  cluster.LoadBalance
	cfg config

	closedFlag atomic.Bool // state != stateOpen, for Invoke's lock-free check

	log         *zap.Logger
	metrics     *telemetry.Failback // nil without WithMeterProvider
	fullLoop    *logging.Loop       // queue-full episodes
	dropping    atomic.Bool         // in a queue-full episode
	fullEpisode atomic.Int64        // calls refused in the current queue-full episode
	nextSeq     atomic.Uint64       // tasks created; seeds and FIFO order of equal due times

	retrier    *rebound.Retrier // the policy, compiled once; one Schedule per task
	acct       *rebound.Retrier // with a budget or a throttle: counts first attempts
	epoch      time.Time        // due times are nanoseconds since epoch (monotonic)
	baseCtx    context.Context
	cancelBase context.CancelFunc

	mu                                  sync.Mutex
	cond                                sync.Cond           // workers wait on it for ready tasks or close; L is &mu
	heap                                dueheap.Heap[*task] // waiting for their due time
	ready                               []*task             // due, waiting for a worker (FIFO from readyHead)
	readyHead                           int
	reserved                            int                // accepted, being reported to Hooks.Queued, not pushed yet
	running                             map[string]int     // retry attempts running, by target
	parked                              map[string][]*task // due, waiting for a slot on their target (FIFO)
	nparked                             int
	inflight                            int          // held by a worker
	wait                                dueheap.Wait // the scheduler goroutine's timer (shared with subscriber's)
	state                               state
	drained                             chan struct{} // Shutdown: closed when nothing is pending, or by Close
	cut                                 bool          // stopped before a drain completed (Shutdown returns ErrClosed)
	offered, retried, succeeded, gaveUp uint64
	throttledN                          uint64 // retries rejected locally (Stats.Throttled)
	quarantined                         uint64 // stored calls set aside by New (Stats.Quarantined)
	dropped                             [len(dropReasons)]uint64

	breakerWaits uint64 // retries that waited for a breaker (Stats.BreakerWaits); guarded by mu

	reservers sync.WaitGroup // Invoke calls between accepting a task and filing it
	inHook    sync.Map       // ids of the goroutines running a hook (Close from a hook)
	done      chan struct{}  // closed by Close
	stopped   chan struct{}  // closed when the last goroutine has exited
	closeDone chan struct{}  // closed when Close has reported everything
	live      atomic.Int32   // goroutines not exited yet
}

var _ cluster.Invoker = (*Invoker)(nil)

// New returns a failback invoker over dir and starts its goroutines: one
// scheduler and WithConcurrency workers, all stopped by Shutdown or Close.
// It returns a *rebound.ArgumentError (matching rebound.ErrInvalidArgument,
// naming the option and its rule) for a nil dir (or a nil pointer in it)
// or a bad option value, and starts nothing then; nil options are
// ignored. Without options:
// DefaultPolicy() (3 retries), at most 100 tasks, 8 workers, a 10 s
// timeout per retry attempt, no TTL, DefaultRetryable, a *cluster.Random
// load balance, no hooks, no logging. DefaultRetryable retries only errors
// marked rebound.Transient and network errors: a plain errors.New from an
// invoker comes back to the caller, not retried (WithRetryable changes it).
func New(dir cluster.Directory, opts ...Option) (*Invoker, error) {
	cfg := config{
		maxTasks:       DefaultMaxTasks,
		policy:         DefaultPolicy(),
		concurrency:    DefaultConcurrency,
		attemptTimeout: DefaultAttemptTimeout,
		retryable:      DefaultRetryable,
		logger:         zap.NewNop(),
		lb:             &cluster.Random{},
	}
	if dir == nil {
		cfg.bad("New", "dir", "must not be nil: a cluster.Directory is required", nil)
	} else if nilness.Is(dir) {
		cfg.bad("New", "dir", "is a nil pointer: a cluster.Directory is required", nil)
	}
	for _, o := range opts {
		if o != nil {
			o.apply(&cfg)
		}
	}
	if cfg.durable.quarantine && cfg.durable.store != nil {
		if _, ok := cfg.durable.store.(Quarantiner); !ok {
			cfg.bad("WithQuarantine", "store", fmt.Sprintf("(WithStore) must implement failback.Quarantiner (%T does not)", cfg.durable.store), nil)
		}
	}
	if cfg.perTarget == 0 {
		cfg.perTarget = max(1, cfg.concurrency/2)
	}
	if len(cfg.errs) > 0 {
		return nil, errors.Join(cfg.errs...)
	}
	retrier, acct, err := cfg.retriers()
	if err != nil { // WithPolicy validated the policy already
		return nil, err
	}
	log := logging.Redacted(cfg.logger).With(zap.String("component", "failback"))
	f := &Invoker{
		dir:       dir,
		lb:        cfg.lb,
		cfg:       cfg,
		retrier:   retrier,
		acct:      acct,
		log:       log,
		fullLoop:  logging.NewLoop(log, "", zap.String("event", "queue_full"), zap.Int("max_tasks", cfg.maxTasks)),
		epoch:     time.Now(),
		wait:      dueheap.NewWait(),
		done:      make(chan struct{}),
		stopped:   make(chan struct{}),
		closeDone: make(chan struct{}),
		running:   map[string]int{},
		parked:    map[string][]*task{},
	}
	f.cond.L = &f.mu
	if err := f.startMetrics(); err != nil {
		return nil, fmt.Errorf("failback.New: WithMeterProvider: %w", err)
	}
	if err := f.loadStored(); err != nil { // WithStore: the calls a previous invoker left
		_ = f.metrics.Close()
		return nil, err
	}
	f.baseCtx, f.cancelBase = context.WithCancel(context.Background())
	f.live.Store(int32(cfg.concurrency) + 1)
	go f.schedule()
	for range cfg.concurrency {
		go f.work()
	}
	f.startClaimer() // a shared Store (Claimer): claims calls in batches
	return f, nil
}

var errNilInvoker = fmt.Errorf("%w: the load balance selected a nil invoker", cluster.ErrNoInvokers)

// Target returns "failback": an *Invoker is a cluster.Invoker, so it can be
// used wherever one is expected (for example behind another Directory).
func (f *Invoker) Target() string { return "failback" }

// Invoke makes the first attempt of a call in the calling goroutine, with
// ctx, and returns its result if it succeeds. If it fails:
//
//   - after ctx is done, with a rebound.Permanent error, or when the policy
//     allows no retry (MaxAttempts 1): Invoke returns the error unchanged;
//   - with an error that is not retryable (see WithRetryable; by default
//     only rebound.Transient and network errors are): Invoke returns it
//     wrapped with why it was not retried, matching ErrNotRetryable;
//   - with a retryable error: the call is queued for retry and Invoke
//     returns (nil, nil) (then, and only then, Hooks.Queued is called); if
//     it cannot be queued, Invoke returns a *RejectedError wrapping
//     ErrQueueFull, ErrClosed or ErrExpired and the error.
//
// An empty directory (cluster.ErrNoInvokers) is retryable by default: the
// call is queued until a provider appears or its retries run out.
//
// The first attempt runs in the caller's goroutine: a panic in it reaches
// the caller, as with a direct call. Once Shutdown or Close has begun,
// Invoke returns ErrClosed without attempting the call. A nil ctx or inv is
// a *rebound.ArgumentError. inv is kept by a queued task and sent again on
// every retry: it must not be modified after Invoke. On success with a
// Directory and LoadBalance that do not allocate (NewStaticDirectory,
// cluster.Random, cluster.RoundRobin), Invoke adds no allocation to the
// invoker's own.
func (f *Invoker) Invoke(ctx context.Context, inv *cluster.Invocation) (any, error) {
	if ctx == nil || inv == nil {
		return nil, invalidInvoke(ctx == nil)
	}
	if f.closedFlag.Load() {
		return nil, ErrClosed
	}
	if f.cfg.durable.store != nil {
		inv = withIdempotencyKey(inv)
	}
	if f.cfg.tracer != nil {
		return f.invokeTraced(ctx, inv) // trace.go
	}
	target, res, err := f.first(ctx, inv)
	if err == nil {
		return res, nil
	}
	return nil, f.firstFailure(ctx, inv, target, err)
}

// first makes a call's first attempt. With a budget or a throttle it is a
// deposit and a request, and its outcome is recorded. The throttle never
// rejects a first attempt (its verdict is ignored).
func (f *Invoker) first(ctx context.Context, inv *cluster.Invocation) (cluster.Invoker, any, error) {
	if f.acct == nil {
		return f.attempt(ctx, inv, nil)
	}
	now := time.Now()
	_ = f.acct.Begin(now)
	target, res, err := f.attempt(ctx, inv, nil)
	if err == nil || (!IsStopping(err) && !f.retryable(err)) { // a stopping transport is no answer
		f.accepted(now)
	}
	return target, res, err
}

func invalidInvoke(nilCtx bool) error {
	if nilCtx {
		return &rebound.ArgumentError{Func: "failback.Invoker.Invoke", Arg: "ctx", Reason: "must not be nil"}
	}
	return &rebound.ArgumentError{Func: "failback.Invoker.Invoke", Arg: "inv", Reason: "must not be nil"}
}

// attempt lists, selects and invokes once. target is nil if no invoker was
// selected.
func (f *Invoker) attempt(ctx context.Context, inv *cluster.Invocation, exclude []cluster.Invoker) (cluster.Invoker, any, error) {
	invokers, err := f.dir.List(ctx, inv)
	if err != nil {
		return nil, nil, err
	}
	target, err := f.lb.Select(invokers, inv, exclude)
	if err != nil {
		return nil, nil, err
	}
	if target == nil {
		return nil, nil, errNilInvoker
	}
	res, err := target.Invoke(ctx, inv)
	return target, res, err
}

type callTTLKey struct{}

// WithCallTTL returns a copy of ctx that gives the call Invoked with it a
// time-to-live of d, counted from the failure of its first attempt: if its
// next retry would start after that, the call is dropped with DropExpired
// instead. It overrides WithTTL for that call; d <= 0 means no TTL for it.
func WithCallTTL(ctx context.Context, d time.Duration) context.Context {
	return context.WithValue(ctx, callTTLKey{}, d)
}

// firstFailure decides the fate of a call whose first attempt failed and
// returns what Invoke returns.
func (f *Invoker) firstFailure(ctx context.Context, inv *cluster.Invocation, target cluster.Invoker, err error) error {
	switch {
	case ctx.Err() != nil:
		return err
	case IsStopping(err):
		// The transport is going away: only a Store can carry the call to
		// the next process.
		if f.cfg.durable.store == nil {
			return err
		}
	case !f.retryable(err):
		return notRetried(err)
	}
	t := &task{inv: inv, attempts: 1, lastErr: err}
	if target != nil {
		t.failed = []cluster.Invoker{target}
		t.lastTarget = target.Target()
	}
	if f.cfg.contextValues {
		t.values = context.WithoutCancel(ctx)
	}
	ttl := f.cfg.ttl
	if d, ok := ctx.Value(callTTLKey{}).(time.Duration); ok {
		ttl = d
	}

	seq := f.nextSeq.Add(1) - 1
	now := f.now()
	t.sched = f.retrier.NewSchedule(f.at(now))
	t.att, _ = t.sched.Admit(f.at(now), rebound.FirstAttempt) // asks no gate: Invoke made it
	t.born = now
	t.expires = math.MaxInt64
	if ttl > 0 {
		t.expires = satAdd(now, ttl)
	}
	d, reason := f.nextDelay(t, now)
	if reason != nil {
		return err // the policy allows no retry at all
	}
	return f.offer(t, d, seq)
}

// offer queues t to run after d, or refuses it. Queued is reported, and
// the task filed, by this goroutine before the task can run; Close waits
// for it (reservers).
func (f *Invoker) offer(t *task, d time.Duration, seq uint64) error {
	t.seq = seq
	t.due = satAdd(t.born, d)

	f.mu.Lock()
	f.offered++
	switch {
	case f.state != stateOpen:
		f.dropped[dropIndex(DropClosed)]++
		f.mu.Unlock()
		return f.reject(t, DropClosed)
	case f.pendingLocked() >= f.cfg.maxTasks:
		f.dropped[dropIndex(DropQueueFull)]++
		f.mu.Unlock()
		return f.reject(t, DropQueueFull)
	case t.due > t.expires:
		f.dropped[dropIndex(DropExpired)]++
		f.mu.Unlock()
		return f.reject(t, DropExpired)
	}
	f.reserved++
	f.reservers.Add(1)
	f.mu.Unlock()
	defer f.reservers.Done()

	// The task is ours until it is pushed: store it (WithStore: on disk
	// before Invoke returns) and report it first.
	if f.cfg.durable.store != nil {
		if err := f.storeAdd(t); err != nil {
			f.mu.Lock()
			f.reserved--
			f.dropped[dropIndex(DropStore)]++
			f.endLocked()
			f.mu.Unlock()
			t.lastErr = errors.Join(err, t.lastErr)
			return f.reject(t, DropStore)
		}
	}
	pe := f.noteAccepted(t, d)

	f.mu.Lock()
	f.reserved--
	switch {
	case pe != nil:
		f.gaveUp++
		f.endLocked()
		f.mu.Unlock()
		f.storeEnded(t, "")
		f.gaveUpReport(t, ErrPanicked, pe, f.now())
	case f.state == stateClosed:
		f.dropped[dropIndex(DropClosed)]++
		f.endLocked()
		f.mu.Unlock()
		f.droppedReport(t, DropClosed, f.now())
	default:
		f.pushLocked(t)
		f.mu.Unlock()
	}
	return nil
}

// noteAccepted ends a queue-full episode and reports a queued task; it
// returns the panic of the Queued hook, if any.
func (f *Invoker) noteAccepted(t *task, d time.Duration) *PanicError {
	if f.dropping.Load() && f.dropping.CompareAndSwap(true, false) {
		f.fullLoop.Succeeded(int(f.fullEpisode.Swap(0)) + 1)
	}
	if ce := f.log.Check(zapcore.DebugLevel, "failback: call queued for retry"); ce != nil {
		ce.Write(zap.String("method", t.inv.Method), zap.String("target", t.target()),
			zap.Duration("delay", d), zap.Error(t.lastErr))
	}
	if f.observed() {
		return f.emit(rebound.EventQueued, f.info(t, t.lastErr, d, t.born))
	}
	return nil
}

func (f *Invoker) reject(t *task, reason DropReason) error {
	err := &RejectedError{Reason: reason, Err: t.lastErr}
	switch reason {
	case DropQueueFull:
		n := f.fullEpisode.Add(1)
		f.dropping.Store(true)
		f.fullLoop.Failed(int(n), fmt.Errorf("%w (%d tasks): call to %q dropped: %w", ErrQueueFull, f.cfg.maxTasks, t.inv.Method, t.lastErr), 0)
	default:
		if ce := f.log.Check(zapcore.WarnLevel, "failback: call not queued"); ce != nil {
			ce.Write(zap.String("reason", string(reason)), zap.String("method", t.inv.Method),
				zap.String("target", t.target()), zap.Error(t.lastErr))
		}
	}
	if f.observed() {
		info := f.info(t, err, 0, t.born)
		info.Reason = reason
		_ = f.emit(rebound.EventDropped, info)
	}
	return err
}

// Shutdown stops the invoker gracefully, like net/http.Server's Shutdown:
// Invoke returns ErrClosed from then on (a call whose first attempt fails
// afterwards gets a *RejectedError wrapping ErrClosed), and the tasks
// already queued keep being retried on their schedule until every one has
// ended (Succeeded, GaveUp or Dropped), or until ctx is done. Then it stops
// the invoker as Close does, dropping what is left with DropClosed, and
// returns after every call has been reported. (Retries that Close cancels
// return when their invoker honours its ctx, as cluster.Invoker requires.)
//
// Its result says how the invoker ended, the same whatever the order of
// the calls:
//
//   - nil: the drain completed (every queued call ended on its own) before
//     anything stopped the invoker; a Shutdown or Close after that returns
//     nil too;
//   - ctx.Err(): this call's ctx was done before the drain completed (it
//     then stopped the invoker);
//   - ErrClosed: the invoker was stopped before its drain completed by
//     something else: Close, called before this Shutdown or during its
//     drain, or another Shutdown whose ctx was done. Like net/http.Server's
//     ErrServerClosed, once Close has been called every Shutdown returns
//     ErrClosed.
//
// Calling Shutdown or Close again, or concurrently, waits for the same
// end. A nil ctx is a *rebound.ArgumentError (and stops nothing).
//
// Called from a hook, Shutdown begins the drain as above (Invoke returns
// ErrClosed from then on) and returns rebound.ErrCalledFromCallback without waiting:
// waiting would include that hook. The drain, bounded by ctx, and the stop
// go on in a background goroutine; a Close or Shutdown from outside a hook
// waits for their end.
func (f *Invoker) Shutdown(ctx context.Context) error {
	if ctx == nil {
		return &rebound.ArgumentError{Func: "failback.Invoker.Shutdown", Arg: "ctx", Reason: "must not be nil"}
	}
	f.mu.Lock()
	if f.state == stateOpen {
		f.state = stateDraining
		f.closedFlag.Store(true)
		f.drained = make(chan struct{})
		f.endLocked()
	}
	drained := f.drained
	f.mu.Unlock()
	if f.inHookNow() {
		// Waiting here would wait for this hook: drain and stop in the
		// background.
		go f.finishShutdown(ctx, drained)
		return rebound.ErrCalledFromCallback
	}
	return f.finishShutdown(ctx, drained)
}

// finishShutdown is Shutdown after the drain began.
func (f *Invoker) finishShutdown(ctx context.Context, drained chan struct{}) error {
	var err error
	if drained != nil {
		select {
		case <-drained:
		default:
			select {
			case <-drained:
			case <-ctx.Done():
				select {
				case <-drained: // both happened: the drain counts
				default:
					err = ctx.Err()
				}
			}
		}
	}
	f.stop()
	if err == nil {
		f.mu.Lock()
		if f.cut {
			err = ErrClosed
		}
		f.mu.Unlock()
	}
	return err
}

// Close stops the invoker at once: Invoke returns ErrClosed from then on,
// running retry attempts are cancelled (their context is done), and every
// task still queued is reported through Hooks.Dropped with DropClosed (and
// logged at Warn). A task whose cancelled attempt then fails is reported
// Dropped(DropClosed) by its worker, unless it failed for a reason of its
// own (an error that is not retryable, or the policy exhausted): that is
// GaveUp; one whose attempt succeeds anyway is Succeeded. (An invoker
// whose cancelled attempt returns an error that neither matches
// context.Canceled nor is marked Stopping makes it look like the call's
// own outcome: wrap the context's error, or mark it Stopping.) With a
// Store, the calls dropped with DropClosed stay stored. Close does not
// close the Directory.
//
// Close returns once every call has been reported and the goroutines New
// started have exited; it waits for the cancelled attempts to return (an
// invoker must return when its ctx is done). It returns nil, or
// rebound.ErrCalledFromCallback when called from a hook (below). It is
// idempotent: a later or concurrent call waits for the first one to finish.
// To let queued calls finish first, use Shutdown.
//
// Called from a hook, Close stops the invoker as above but returns
// rebound.ErrCalledFromCallback without waiting (the wait would include that hook):
// Invoke returns ErrClosed and running attempts are cancelled from then
// on, and a background goroutine reports the queued tasks as dropped and
// finishes the stop once the hook has returned.
func (f *Invoker) Close() error {
	if f.inHookNow() {
		if pending, first := f.beginStop(); first {
			go f.finishStop(pending)
		}
		return rebound.ErrCalledFromCallback
	}
	f.stop()
	return nil
}

// stop is Close; the first caller does the work, the others wait for it.
func (f *Invoker) stop() {
	pending, first := f.beginStop()
	if !first {
		<-f.closeDone
		return
	}
	f.finishStop(pending)
}

// beginStop moves the invoker to stateClosed and returns the tasks queued
// then; first is false if an earlier call did (it then returns nothing).
func (f *Invoker) beginStop() (pending []*task, first bool) {
	f.mu.Lock()
	if f.state == stateClosed {
		f.mu.Unlock()
		return nil, false
	}
	switch f.state {
	case stateDraining:
		select {
		case <-f.drained:
		default: // Close cuts a Shutdown's drain short
			f.cut = true
			close(f.drained)
		}
	case stateOpen:
		f.cut = true // stopped without a drain: every Shutdown returns ErrClosed
	}
	f.state = stateClosed
	f.closedFlag.Store(true)
	pending = make([]*task, 0, len(f.heap)+len(f.ready)-f.readyHead+f.nparked)
	pending = append(pending, f.ready[f.readyHead:]...)
	for _, q := range f.parked {
		pending = append(pending, q...)
	}
	pending = append(pending, f.heap...)
	f.ready, f.readyHead, f.heap, f.parked, f.nparked = nil, 0, nil, nil, 0
	f.dropped[dropIndex(DropClosed)] += uint64(len(pending))
	f.mu.Unlock()

	f.cancelBase()
	close(f.done)
	f.cond.Broadcast()
	return pending, true
}

// finishStop reports the tasks beginStop took as dropped, waits for the
// goroutines to exit and marks the stop done.
func (f *Invoker) finishStop(pending []*task) {
	switch {
	case len(pending) > 0 && f.cfg.durable.store != nil:
		f.log.Info("failback: closing: queued calls stay in the store for the next invoker", zap.Int("tasks", len(pending)))
	case len(pending) > 0:
		f.log.Warn("failback: closing: dropping queued calls", zap.Int("tasks", len(pending)))
	}
	now := f.now()
	for _, t := range pending {
		f.droppedReport(t, DropClosed, now)
	}
	f.reservers.Wait()
	<-f.stopped
	_ = f.metrics.Close()
	close(f.closeDone)
}

// endLocked is called when a task may have left the invoker: it ends a
// Shutdown's drain once nothing is pending.
func (f *Invoker) endLocked() {
	if f.state == stateDraining && f.pendingLocked() == 0 {
		select {
		case <-f.drained:
		default:
			close(f.drained)
		}
	}
}

// Stats returns the current counters (see Stats for how they add up).
func (f *Invoker) Stats() Stats {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := Stats{
		Queued:      f.queuedLocked(),
		InFlight:    f.inflight,
		Offered:     f.offered,
		Retried:     f.retried,
		Throttled:   f.throttledN,
		Quarantined: f.quarantined,
		Succeeded:   f.succeeded,
		GaveUp:      f.gaveUp,
		Dropped:     make(map[DropReason]uint64, len(dropReasons)),
	}
	for i, r := range dropReasons {
		s.Dropped[r] = f.dropped[i]
	}
	s.BreakerWaits = f.breakerWaits
	return s
}

func dropIndex(r DropReason) int {
	for i, x := range dropReasons {
		if x == r {
			return i
		}
	}
	panic("failback: unknown DropReason " + string(r))
}

func (f *Invoker) queuedLocked() int {
	return len(f.heap) + len(f.ready) - f.readyHead + f.reserved + f.nparked
}
func (f *Invoker) pendingLocked() int { return f.queuedLocked() + f.inflight }

// now returns the monotonic time since epoch in nanoseconds.
func (f *Invoker) now() int64 { return int64(time.Since(f.epoch)) }

// nextDelay asks the task's rebound.Schedule (the one step function:
// policy, Retry-After capped by Policy.MaxRetryAfter, MaxAttempts,
// MaxElapsed) for the wait before t's next attempt. A non-nil reason (the
// Reason of the Schedule's *rebound.RetryError, wrapping
// rebound.ErrExhausted) means the policy allows no further attempt.
func (f *Invoker) nextDelay(t *task, now int64) (time.Duration, error) {
	last := t.lastErr
	if IsStopping(last) {
		last = ErrStopping // a Permanent mark under it does not count
	}
	dec := t.att.Done(last, f.at(now))
	t.made(0)
	if dec.Verdict == rebound.WaitFor {
		return dec.Delay, nil
	}
	return 0, stopReason(dec.Err)
}

// accepted tells the engine (for the throttle of WithThrottle) that a
// provider accepted an attempt at now: it succeeded, or failed with an
// error that retrying would not fix (the provider answered).
func (f *Invoker) accepted(now time.Time) {
	f.acct.Record(nil, now)
}

// at converts a time since epoch to a time.Time for the Schedule.
func (f *Invoker) at(now int64) time.Time { return f.epoch.Add(time.Duration(now)) }

func (f *Invoker) info(t *task, err error, delay time.Duration, now int64) Task {
	return Task{
		Invocation: t.inv,
		Attempts:   int(t.attempts),
		Target:     t.target(),
		Err:        err,
		Delay:      delay,
		Age:        time.Duration(now - t.born),
	}
}

// enterHook marks the calling goroutine as running a hook until the
// returned function is called (nested hook calls on one goroutine, such as
// a hook calling Invoke, keep the outer mark).
func (f *Invoker) enterHook() func() {
	id := goid.ID()
	if _, nested := f.inHook.LoadOrStore(id, struct{}{}); nested {
		return func() {}
	}
	return func() { f.inHook.Delete(id) }
}

// inHookNow reports whether the calling goroutine is running a hook.
func (f *Invoker) inHookNow() bool {
	_, ok := f.inHook.Load(goid.ID())
	return ok
}

func (f *Invoker) observed() bool { return len(f.cfg.observers) > 0 }

// emit hands an event about info to every observer, recovering a panic
// (returned, the first one, and logged at Error).
func (f *Invoker) emit(kind rebound.EventKind, info Task) (pe *PanicError) {
	defer f.enterHook()()
	e := rebound.Event{Kind: kind, Attempt: info.Attempts, Err: info.Err, Delay: info.Delay, Elapsed: info.Age, Detail: info}
	for _, o := range f.cfg.observers {
		if p := f.observe(o, e); p != nil && pe == nil {
			pe = p
		}
	}
	return pe
}

func (f *Invoker) observe(o rebound.Observer, e rebound.Event) (pe *PanicError) {
	defer func() {
		if r := recover(); r != nil {
			pe = cluster.NewPanicError("failback observer ("+e.Kind.String()+")", r)
			f.logPanic(pe, e.Detail.(Task).Invocation)
		}
	}()
	o.Observe(e)
	return nil
}

func (f *Invoker) logPanic(pe *PanicError, inv *cluster.Invocation) {
	f.log.Error("failback: recovered a panic", zap.String("op", pe.Op), zap.String("method", inv.Method),
		zap.Any("panic", pe.Value), zap.ByteString("stack", pe.Stack))
}

// droppedReport reports a task that was accepted as dropped.
func (f *Invoker) droppedReport(t *task, reason DropReason, now int64) {
	if ce := f.log.Check(zapcore.WarnLevel, "failback: dropped queued call"); ce != nil {
		ce.Write(zap.String("reason", string(reason)),
			zap.String("method", t.inv.Method), zap.Int("attempts", int(t.attempts)),
			zap.String("target", t.target()), zap.Duration("age", time.Duration(now-t.born)), zap.Error(t.lastErr))
	}
	if f.observed() {
		info := f.info(t, t.lastErr, 0, now)
		info.Reason = reason
		_ = f.emit(rebound.EventDropped, info)
	}
}

// gaveUpReport reports a task that gave up.
func (f *Invoker) gaveUpReport(t *task, reason, last error, now int64) {
	gerr := &GiveUpError{Attempts: int(t.attempts), Reason: reason, Last: last}
	if ce := f.log.Check(zapcore.WarnLevel, "failback: gave up on call"); ce != nil {
		ce.Write(zap.String("method", t.inv.Method),
			zap.Int("attempts", int(t.attempts)), zap.String("target", t.target()),
			zap.Duration("age", time.Duration(now-t.born)), zap.NamedError("reason", reason), zap.Error(last))
	}
	if f.observed() {
		_ = f.emit(rebound.EventGiveUp, f.info(t, gerr, 0, now))
	}
}

func satAdd(a int64, d time.Duration) int64 {
	if s := a + int64(d); s >= a {
		return s
	}
	return math.MaxInt64
}
