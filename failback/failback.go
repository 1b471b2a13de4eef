package failback

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/cluster"
	"github.com/rebound-go/rebound/internal/admit"
	"github.com/rebound-go/rebound/internal/dueheap"
	"github.com/rebound-go/rebound/internal/telemetry"
	"github.com/rebound-go/rebound/logging"
)

// state is the life stage of an Invoker.
type state int

const (
	stateOpen     state = iota
	stateDraining       // Shutdown began: no new calls, queued ones still retried
	stateClosed         // Close began: nothing runs any more
)

// Invoker is a failback cluster invoker: a call whose first attempt fails
// with a retryable error is retried in the background, and the caller gets
// (nil, nil). Use it only for calls that need no answer (notifications,
// audit records). Each queued call ends in exactly one of EventRecovered,
// EventGiveUp or EventDropped.
//
// An *Invoker is itself a cluster.Invoker. Create it with New; all methods
// are safe for concurrent use.
type Invoker struct {
	dir cluster.Directory
	lb  cluster.LoadBalance
	cfg config

	closedFlag atomic.Bool // state != stateOpen, for Invoke's lock-free check

	log         *zap.Logger
	metrics     *telemetry.Failback // nil without a meter provider (WithPolicy)
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
	reserved                            int                // accepted, being reported (EventQueued), not pushed yet
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

// New returns a failback invoker over dir and starts its goroutines, which
// Shutdown or Close stop. A nil dir or a bad option is a
// *rebound.ArgumentError. Without options: DefaultPolicy(), 100 tasks, 8
// workers, 10 s per retry attempt, DefaultRetryable, cluster.Random().
func New(dir cluster.Directory, opts ...Option) (*Invoker, error) {
	cfg, err := newConfig(dir, opts)
	if err != nil {
		return nil, err
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
		return nil, &rebound.ArgumentError{Func: "failback.WithPolicy", Arg: "opts",
			Reason: "rebound.WithMeterProvider's provider could not create failback's instruments", Err: err}
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

// Invoke makes the first attempt of a call with ctx and returns its result.
// If it fails with a retryable error, the call is queued and Invoke returns
// (nil, nil); otherwise it returns the error (see the package doc's table).
// inv is kept by a queued call: it must not be modified after Invoke.
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
	_ = admit.Begin(f.acct, now)
	target, res, err := f.attempt(ctx, inv, nil)
	if err == nil || (!isStopping(err) && !f.retryable(err)) { // a stopping transport is no answer
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

// firstFailure decides the fate of a call whose first attempt failed and
// returns what Invoke returns.
func (f *Invoker) firstFailure(ctx context.Context, inv *cluster.Invocation, target cluster.Invoker, err error) error {
	switch {
	case ctx.Err() != nil:
		return err
	case isStopping(err):
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

	seq := f.nextSeq.Add(1) - 1
	now := f.now()
	t.sched = f.retrier.NewSchedule(f.at(now))
	t.att, _ = t.sched.Admit(f.at(now)) // a first attempt: asks no gate, Invoke made it
	t.born = now
	t.expires = math.MaxInt64
	if ttl > 0 {
		t.expires = satAdd(now, ttl)
	}
	// The Schedule gives the first wait: the policy, a Retry-After capped
	// by Policy.MaxRetryAfter, the limits. A Permanent mark under a
	// Stopping one does not count.
	last := err
	if isStopping(last) {
		last = errStopping
	}
	dec := t.att.Done(last, f.at(now))
	if t.attempts = counted(dec.Attempt); dec.Stop {
		return err // the policy allows no retry at all
	}
	return f.offer(t, dec.Delay, seq)
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
		f.dropped[dropIndex(dropClosed)]++
		f.mu.Unlock()
		return f.reject(t, dropClosed)
	case f.pendingLocked() >= f.cfg.maxTasks:
		f.dropped[dropIndex(dropQueueFull)]++
		f.mu.Unlock()
		return f.reject(t, dropQueueFull)
	case t.due > t.expires:
		f.dropped[dropIndex(dropExpired)]++
		f.mu.Unlock()
		return f.reject(t, dropExpired)
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
			f.dropped[dropIndex(dropStore)]++
			f.endLocked()
			f.mu.Unlock()
			t.lastErr = errors.Join(err, t.lastErr)
			return f.reject(t, dropStore)
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
		f.storeOutcome(t, outGaveUp, "")
		f.gaveUpReport(t, errPanicked, pe, f.now())
	case f.state == stateClosed:
		f.dropped[dropIndex(dropClosed)]++
		f.endLocked()
		f.mu.Unlock()
		f.droppedReport(t, dropClosed, f.now())
	default:
		f.pushLocked(t)
		f.mu.Unlock()
	}
	return nil
}

// noteAccepted ends a queue-full episode and reports a queued task; it
// returns the panic of the Queued hook, if any.
func (f *Invoker) noteAccepted(t *task, d time.Duration) *cluster.PanicError {
	if f.dropping.Load() && f.dropping.CompareAndSwap(true, false) {
		f.fullLoop.Observe(rebound.Event{Kind: rebound.EventAttempt, Attempt: int(f.fullEpisode.Swap(0)) + 1})
	}
	if ce := f.log.Check(zapcore.DebugLevel, "failback: call queued for retry"); ce != nil {
		ce.Write(zap.String("method", t.inv.Method), zap.String("target", t.lastTarget),
			zap.Duration("delay", d), zap.Error(t.lastErr))
	}
	if f.observed() {
		return f.emit(rebound.EventQueued, t, t.lastErr, d, t.born, nil)
	}
	return nil
}

func (f *Invoker) reject(t *task, reason dropReason) error {
	err := &rejectedError{Reason: reason.sentinel(), Err: t.lastErr}
	switch reason {
	case dropQueueFull:
		n := f.fullEpisode.Add(1)
		f.dropping.Store(true)
		f.fullLoop.Observe(rebound.Event{Kind: rebound.EventRetry, Attempt: int(n), Err: fmt.Errorf("%w (%d tasks): call to %q dropped: %w", ErrQueueFull, f.cfg.maxTasks, t.inv.Method, t.lastErr)})
	default:
		if ce := f.log.Check(zapcore.WarnLevel, "failback: call not queued"); ce != nil {
			ce.Write(zap.String("reason", string(reason)), zap.String("method", t.inv.Method),
				zap.String("target", t.lastTarget), zap.Error(t.lastErr))
		}
	}
	if f.observed() {
		_ = f.emit(rebound.EventDropped, t, err, 0, t.born, reason.sentinel())
	}
	return err
}

func (f *Invoker) queuedLocked() int {
	return len(f.heap) + len(f.ready) - f.readyHead + f.reserved + f.nparked
}
func (f *Invoker) pendingLocked() int { return f.queuedLocked() + f.inflight }

// now returns the monotonic time since epoch in nanoseconds.
func (f *Invoker) now() int64 { return int64(time.Since(f.epoch)) }

// accepted tells the engine (for the throttle of rebound.WithThrottle) that a
// provider accepted an attempt at now: it succeeded, or failed with an
// error that retrying would not fix (the provider answered).
func (f *Invoker) accepted(now time.Time) {
	admit.Record(f.acct, nil, now)
}

// at converts a time since epoch to a time.Time, for the Schedule and the
// Store.
func (f *Invoker) at(now int64) time.Time { return f.epoch.Add(time.Duration(now)) }

func satAdd(a int64, d time.Duration) int64 {
	if s := a + int64(d); s >= a {
		return s
	}
	return math.MaxInt64
}
