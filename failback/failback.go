package failback

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/cluster"
	"github.com/rebound-go/rebound/logging"
)

// Task describes a call handed to the background, as passed to Hooks. It
// is a copy: keeping it is safe.
type Task struct {
	// Invocation is the call, as given to Invoke (shared, read only).
	Invocation *cluster.Invocation
	// Attempts counts the attempts made so far, the first one (in Invoke)
	// included: 1 in Queued, 2 after the first retry.
	Attempts int
	// Target is the Target of the invoker of the last attempt, "" if none
	// was selected (for example an empty directory).
	Target string
	// Err is the last attempt's error: nil in Succeeded; a *GiveUpError in
	// GaveUp; a *RejectedError in Dropped for a call that was never queued.
	Err error
	// Delay is the wait before the next attempt (Queued and Retried).
	Delay time.Duration
	// Age is the time since the first attempt failed.
	Age time.Duration
}

// Hooks are called on the life events of calls handed to the background.
// Each call that is queued ends in exactly one of Succeeded, GaveUp or
// Dropped; Queued comes first, then one Retried per failed retry that is
// followed by another. A call that could not be queued gets only Dropped.
//
// Hooks are called with no lock held, so they may call Stats. They must be
// safe for concurrent use, should return quickly (they hold up the
// goroutine that calls them: a caller of Invoke, a retry worker, or Close)
// and must not call Close. Nil fields are skipped.
type Hooks struct {
	// Queued: the call's first attempt failed with a retryable error and it
	// was queued; Invoke is about to return (nil, nil). Called from the
	// goroutine calling Invoke, before the task can run.
	Queued func(Task)
	// Retried: a retry attempt failed with a retryable error and the next
	// one is scheduled after Delay. Called from a retry worker.
	Retried func(Task)
	// Succeeded: a retry attempt succeeded. Called from a retry worker.
	Succeeded func(Task)
	// GaveUp: the task stopped: retries or policy exhausted, or an error
	// that is not retryable; Err is a *GiveUpError. Called from a retry
	// worker.
	GaveUp func(Task)
	// Dropped: the call will not be retried (any further) for a reason
	// other than its own outcome. DropQueueFull, and DropClosed for a call
	// that failed while Close began: from the goroutine calling Invoke
	// (Invoke also returns a *RejectedError). DropClosed for tasks queued
	// at Close: from the first goroutine calling Close, before Close waits.
	// DropClosed for a task whose running attempt failed after Close began
	// (its context is cancelled by Close): from its retry worker.
	Dropped func(Task, DropReason)
}

// Stats counts the calls handed to the background. Every call whose first
// attempt failed with a retryable error while retries were enabled is
// counted in Offered, and is at any moment in exactly one of the other
// buckets, so:
//
//	Offered == Queued + InFlight + Succeeded + GaveUp + Dropped[DropQueueFull] + Dropped[DropClosed]
//
// Calls that succeed on their first attempt, or fail with an error that is
// not retryable, are not counted.
type Stats struct {
	// Queued is the number of tasks waiting now, for their due time or for
	// a worker.
	Queued int
	// InFlight is the number of retry attempts running now.
	InFlight int
	// Offered counts the calls whose first attempt failed with a retryable
	// error.
	Offered uint64
	// Retried counts retry attempts started (a task retried 3 times counts
	// 3).
	Retried uint64
	// Succeeded counts tasks that succeeded on a retry.
	Succeeded uint64
	// GaveUp counts tasks that stopped with an error (see Hooks.GaveUp).
	GaveUp uint64
	// Dropped counts calls dropped, by reason; it always has an entry for
	// DropQueueFull and DropClosed.
	Dropped map[DropReason]uint64
}

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
// Create it with New; the zero value is not usable. All methods are safe
// for concurrent use. Close stops the goroutines New starts.
type Invoker struct {
	dir cluster.Directory
	lb  cluster.LoadBalance
	cfg config

	closedFlag atomic.Bool // mirrors closed, for Invoke's lock-free check

	log         *zap.Logger
	fullLoop    *logging.Loop // queue-full episodes
	dropping    atomic.Bool   // in a queue-full episode
	fullEpisode atomic.Int64  // calls refused in the current queue-full episode
	nextSeq     atomic.Uint64 // tasks created; seeds and FIFO order of equal due times

	epoch      time.Time // due times are nanoseconds since epoch (monotonic)
	baseCtx    context.Context
	cancelBase context.CancelFunc

	mu        sync.Mutex
	cond      sync.Cond // workers wait on it for ready tasks or close; L is &mu
	heap      taskHeap  // waiting for their due time
	ready     []*task   // due, waiting for a worker (FIFO from readyHead)
	readyHead int
	reserved  int   // accepted, being reported to Hooks.Queued, not pushed yet
	inflight  int   // running a retry attempt
	timerAt   int64 // due time the scheduler's timer is set for; MaxInt64 if none
	closed    bool
	offered, retried, succeeded, gaveUp,
	droppedFull, droppedClosed uint64

	wake    chan struct{} // buffered(1): an earlier due time was pushed
	done    chan struct{} // closed by Close
	stopped chan struct{} // closed when the last goroutine has exited
	live    atomic.Int32  // goroutines not exited yet
}

// New returns a failback invoker over dir and starts its goroutines: one
// scheduler and WithConcurrency workers, all stopped by Close. It returns
// an error wrapping ErrInvalidArgument (naming the option and its rule)
// for a nil dir or a bad option, and starts nothing then. Without options:
// 3 retries, at most 100 tasks, DefaultPolicy(), 8 workers, a 10 s timeout
// per retry attempt, DefaultRetryable, a *cluster.Random load balance, no
// hooks, no logging.
func New(dir cluster.Directory, opts ...Option) (*Invoker, error) {
	cfg := config{
		retries:        DefaultRetries,
		maxTasks:       DefaultMaxTasks,
		policy:         DefaultPolicy(),
		concurrency:    DefaultConcurrency,
		attemptTimeout: DefaultAttemptTimeout,
		retryable:      DefaultRetryable,
		logger:         zap.NewNop(),
		lb:             &cluster.Random{},
	}
	if dir == nil {
		cfg.bad("New: dir is nil: a cluster.Directory is required")
	}
	for _, o := range opts {
		if o == nil {
			cfg.bad("New: option is nil")
			continue
		}
		o.apply(&cfg)
	}
	if len(cfg.errs) > 0 {
		return nil, errors.Join(cfg.errs...)
	}
	log := logging.Redacted(cfg.logger).With(zap.String("component", "failback"))
	f := &Invoker{
		dir:      dir,
		lb:       cfg.lb,
		cfg:      cfg,
		log:      log,
		fullLoop: logging.NewLoop(log, "", zap.String("event", "queue_full"), zap.Int("max_tasks", cfg.maxTasks)),
		epoch:    time.Now(),
		timerAt:  math.MaxInt64,
		wake:     make(chan struct{}, 1),
		done:     make(chan struct{}),
		stopped:  make(chan struct{}),
	}
	f.cond.L = &f.mu
	f.baseCtx, f.cancelBase = context.WithCancel(context.Background())
	f.live.Store(int32(cfg.concurrency) + 1)
	go f.schedule()
	for range cfg.concurrency {
		go f.work()
	}
	return f, nil
}

var errNilInvoker = fmt.Errorf("%w: the load balance selected a nil invoker", cluster.ErrNoInvokers)

// Invoke makes the first attempt of a call in the calling goroutine, with
// ctx, and returns its result if it succeeds. If it fails:
//
//   - with an error that is not retryable (see WithRetryable), or after ctx
//     is done, or when retries are disabled (WithRetries(0)) or the policy
//     allows none: Invoke returns the error unchanged;
//   - with a retryable error: the call is queued for retry and Invoke
//     returns (nil, nil); if it cannot be queued, Invoke returns a
//     *RejectedError wrapping ErrQueueFull or ErrClosed and the error.
//
// An empty directory (cluster.ErrNoInvokers) is retryable by default: the
// call is queued until a provider appears or its retries run out.
//
// After Close, Invoke returns ErrClosed without attempting the call. A nil
// ctx or inv is an error wrapping ErrInvalidArgument. inv is kept by a
// queued task and sent again on every retry: it must not be modified after
// Invoke. On success with a Directory and LoadBalance that do not allocate
// (NewStaticDirectory, cluster.Random, cluster.RoundRobin), Invoke adds no
// allocation to the invoker's own.
func (f *Invoker) Invoke(ctx context.Context, inv *cluster.Invocation) (any, error) {
	if ctx == nil || inv == nil {
		return nil, invalidInvoke(ctx == nil)
	}
	if f.closedFlag.Load() {
		return nil, ErrClosed
	}
	target, res, err := f.attempt(ctx, inv, nil)
	if err == nil {
		return res, nil
	}
	return nil, f.firstFailure(ctx, inv, target, err)
}

func invalidInvoke(nilCtx bool) error {
	if nilCtx {
		return fmt.Errorf("%w: Invoke: ctx is nil", ErrInvalidArgument)
	}
	return fmt.Errorf("%w: Invoke: inv is nil", ErrInvalidArgument)
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
	if ctx.Err() != nil || f.cfg.retries == 0 || !f.retryable(err) {
		return err
	}
	t := &task{inv: inv, attempts: 1, lastErr: err}
	if target != nil {
		t.failed = []cluster.Invoker{target}
	}
	if f.cfg.contextValues {
		t.values = context.WithoutCancel(ctx)
	}

	seq := f.nextSeq.Add(1) - 1
	if f.cfg.seeded {
		t.bo = f.cfg.policy.NewBackOff(rebound.WithSeed(f.cfg.seed + seq*0x9e3779b97f4a7c15))
	} else {
		t.bo = f.cfg.policy.NewBackOff()
	}
	now := f.now()
	t.born = now
	d, reason := f.nextDelay(t, now)
	if reason != nil { // the policy allows no retry at all
		return err
	}
	return f.offer(t, d, seq)
}

// offer queues t to run after d, or refuses it.
func (f *Invoker) offer(t *task, d time.Duration, seq uint64) error {
	t.seq = seq
	t.due = satAdd(t.born, d)
	hookQueued := f.cfg.hooks.Queued != nil

	f.mu.Lock()
	f.offered++
	if f.closed {
		f.droppedClosed++
		f.mu.Unlock()
		return f.reject(t, DropClosed)
	}
	if f.pendingLocked() >= f.cfg.maxTasks {
		f.droppedFull++
		f.mu.Unlock()
		return f.reject(t, DropQueueFull)
	}
	if hookQueued {
		// Report before the task can run, so that Queued comes first.
		f.reserved++
		f.mu.Unlock()
		f.noteAccepted(t, d)
		f.mu.Lock()
		f.reserved--
		if f.closed {
			f.droppedClosed++
			f.mu.Unlock()
			return f.reject(t, DropClosed)
		}
		f.pushLocked(t)
		f.mu.Unlock()
		return nil
	}
	f.pushLocked(t)
	f.mu.Unlock()
	f.noteAccepted(t, d)
	return nil
}

// noteAccepted ends a queue-full episode and reports a queued task.
func (f *Invoker) noteAccepted(t *task, d time.Duration) {
	if f.dropping.Load() && f.dropping.CompareAndSwap(true, false) {
		f.fullLoop.Succeeded(int(f.fullEpisode.Swap(0)) + 1)
	}
	if ce := f.log.Check(zapcore.DebugLevel, "failback: call queued for retry"); ce != nil {
		ce.Write(zap.String("method", t.inv.Method), zap.String("target", t.target()),
			zap.Duration("delay", d), zap.Error(t.lastErr))
	}
	if h := f.cfg.hooks.Queued; h != nil {
		h(f.info(t, t.lastErr, d, t.born))
	}
}

func (f *Invoker) reject(t *task, reason DropReason) error {
	err := &RejectedError{Reason: reason, Err: t.lastErr}
	if reason == DropQueueFull {
		n := f.fullEpisode.Add(1)
		f.dropping.Store(true)
		f.fullLoop.Failed(int(n), fmt.Errorf("%w (%d tasks): call to %q dropped: %w", ErrQueueFull, f.cfg.maxTasks, t.inv.Method, t.lastErr), 0)
	} else {
		if ce := f.log.Check(zapcore.WarnLevel, "failback: call not queued: invoker closed"); ce != nil {
			ce.Write(zap.String("method", t.inv.Method), zap.String("target", t.target()), zap.Error(t.lastErr))
		}
	}
	if h := f.cfg.hooks.Dropped; h != nil {
		h(f.info(t, err, 0, t.born), reason)
	}
	return err
}

// Close stops the invoker: Invoke returns ErrClosed from then on, running
// retry attempts are cancelled (their context is done), and every task
// still queued is reported through Hooks.Dropped with DropClosed (and
// logged at Warn) before Close waits. A task whose running attempt then
// fails is reported the same way by its worker; one whose attempt
// succeeds anyway is reported as Succeeded. Close does not close the
// Directory.
//
// Close then waits until the scheduler and the workers have exited, or
// until ctx is done, and returns ctx.Err() in that case (the goroutines
// still exit once the running attempts return). Close is idempotent: later
// calls only wait again. A nil ctx is an error wrapping ErrInvalidArgument
// (and closes nothing).
func (f *Invoker) Close(ctx context.Context) error {
	if ctx == nil {
		return fmt.Errorf("%w: Close: ctx is nil", ErrInvalidArgument)
	}
	var pending []*task
	f.mu.Lock()
	first := !f.closed
	if first {
		f.closed = true
		f.closedFlag.Store(true)
		pending = make([]*task, 0, len(f.heap)+len(f.ready)-f.readyHead)
		pending = append(pending, f.ready[f.readyHead:]...)
		pending = append(pending, f.heap...)
		f.ready, f.readyHead, f.heap = nil, 0, nil
		f.droppedClosed += uint64(len(pending))
	}
	f.mu.Unlock()
	if first {
		f.cancelBase()
		close(f.done)
		f.cond.Broadcast()
		if len(pending) > 0 {
			f.log.Warn("failback: closing: dropping queued calls", zap.Int("tasks", len(pending)))
		}
		for _, t := range pending {
			f.dropped(t, DropClosed)
		}
	}
	select {
	case <-f.stopped:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// dropped reports a queued task dropped.
func (f *Invoker) dropped(t *task, reason DropReason) {
	now := f.now()
	if ce := f.log.Check(zapcore.WarnLevel, "failback: dropped queued call"); ce != nil {
		ce.Write(zap.String("reason", string(reason)),
			zap.String("method", t.inv.Method), zap.Int("attempts", int(t.attempts)),
			zap.String("target", t.target()), zap.Duration("age", time.Duration(now-t.born)), zap.Error(t.lastErr))
	}
	if h := f.cfg.hooks.Dropped; h != nil {
		h(f.info(t, t.lastErr, 0, now), reason)
	}
}

// Stats returns the current counters (see Stats for how they add up).
func (f *Invoker) Stats() Stats {
	f.mu.Lock()
	defer f.mu.Unlock()
	return Stats{
		Queued:    f.queuedLocked(),
		InFlight:  f.inflight,
		Offered:   f.offered,
		Retried:   f.retried,
		Succeeded: f.succeeded,
		GaveUp:    f.gaveUp,
		Dropped:   map[DropReason]uint64{DropQueueFull: f.droppedFull, DropClosed: f.droppedClosed},
	}
}

func (f *Invoker) queuedLocked() int  { return len(f.heap) + len(f.ready) - f.readyHead + f.reserved }
func (f *Invoker) pendingLocked() int { return f.queuedLocked() + f.inflight }

// now returns the monotonic time since epoch in nanoseconds.
func (f *Invoker) now() int64 { return int64(time.Since(f.epoch)) }

// nextDelay draws the wait before t's next attempt, stretched to the last
// error's Retry-After. A non-nil reason means the policy allows no further
// attempt.
func (f *Invoker) nextDelay(t *task, now int64) (time.Duration, error) {
	d := t.bo.NextBackOff()
	if d == backoff.Stop {
		return 0, rebound.ErrExhausted
	}
	if ra, ok := rebound.RetryAfterDelay(t.lastErr); ok && ra > d {
		d = ra
		if me := f.cfg.policy.MaxElapsed; me > 0 {
			if age := time.Duration(now - t.born); age+d > me {
				return 0, fmt.Errorf("%w: server asked to retry after %v, beyond MaxElapsed %v (%v elapsed)",
					rebound.ErrExhausted, ra, me, age)
			}
		}
	}
	return d, nil
}

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

func satAdd(a int64, d time.Duration) int64 {
	if s := a + int64(d); s >= a {
		return s
	}
	return math.MaxInt64
}
