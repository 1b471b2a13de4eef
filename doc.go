// Package rebound keeps Go services subscribed to their service registry and
// retries failed fire-and-forget calls in the background, without the bugs
// that hand-written retry loops tend to have: busy-spins, fixed-interval
// retry waves, sleeps that ignore cancellation, exponential delays that
// overflow into negative numbers, retries of errors that can never succeed,
// retry storms that multiply an outage, and ignoring (or blindly obeying) a
// server's Retry-After.
//
// # The retry engine
//
// This package owns every retry decision in rebound; subscriber, failback
// and the etcd registration consume it and compute no delay themselves.
//
//   - Policy describes capped exponential backoff with jitter. The zero
//     Policy is usable and means the same in every package: 1 s, doubling,
//     capped at 30 s, full jitter, unlimited attempts, no time limit,
//     Retry-After honoured up to 5 min (MaxRetryAfter). Validate names
//     every bad field.
//   - Schedule is the one door, a two-step handle: Admit(now, kind) says
//     whether an attempt may start (attempt now, wait, stop, drop), and
//     the Attempt's Done(err, now) says what follows its end. It decides
//     classification, MaxAttempts, the delay and Retry-After, MaxElapsed,
//     and the admission of every kind of attempt (throttle, budget,
//     limiter token, breaker; WithAdmission, WithRefusal). Time is passed
//     in, so schedulers with a heap and simulators in virtual time use the
//     same code as goroutine loops (docs/engine.md).
//   - Retrier is a Policy plus options, validated and compiled once: the
//     factory of Schedules, and Do, the retry loop whose success path costs
//     no allocation, hooks included. Retry is the one-call form (it builds
//     what it needs on every call).
//   - RetryBudget (retries at most a ratio of first attempts plus a floor,
//     Finagle-style) and AdaptiveThrottle (the SRE book's client-side
//     throttling) are shared, concurrency-safe values that any number of
//     loops use through WithBudget and WithThrottle.
//   - NewBackOff builds a plain cenkalti/backoff BackOff from a Policy, for
//     code that runs backoff's own loops. It has no error return, so it runs
//     the Normalized policy; Retry, NewRetrier and the constructors of the
//     other packages reject an invalid policy instead.
//
// # One vocabulary
//
// Every package of rebound follows the same rules; this is where they are
// written down.
//
// Stopping. Something that only stops implements io.Closer: Close() error,
// idempotent, returns when its goroutines are gone. Something that has work
// in flight to finish also has Shutdown(ctx) error, like net/http.Server:
// it stops taking work, drains, and returns ctx.Err() if ctx ends first
// (then Close stops what is left).
//
// Errors. Sentinels plus typed errors that wrap their cause; match with
// errors.Is and errors.As. Two families cross package lines:
// ErrInvalidArgument, matched by every *ArgumentError{Func, Arg, Reason,
// Err} (Func qualified: "rebound.WithLimiter", "failback.New"), and
// ErrClosed, matched by every package's own "closed" sentinel (made with
// NewClosedError). Permanent marks an error retrying cannot fix (it stops
// any loop at once, whatever a classifier says); Transient marks one worth
// retrying. A loop that stops retrying a transient error returns a
// *RetryError whose Reason is ErrExhausted, ErrBudgetExhausted or the
// context's error, and which also matches the last attempt's error
// (ErrThrottled when the throttle rejected the last attempt locally).
//
// Options. Each constructor has its own option type, an interface with an
// unexported method (Option for Retry and NewRetrier, BudgetOption,
// ThrottleOption, failback.Option, ...). A nil option is ignored. A bad
// value is an error from the constructor (an *ArgumentError naming the
// option and the rule), never a silent default and never a panic later.
//
// Observation. One event type and one observer shape: every source (the
// retry loops here, failback, a subscriber Manager, a Registration, a
// breaker directory) emits a rebound.Event, whose Kind says what happened
// and whose Detail carries the source's own record, to the Observers of
// its WithObserver option, synchronously from the goroutine where it
// happened and never under a lock, so an observer may call back into
// rebound. The typed Hooks structs (Hooks here, failback.Hooks,
// subscriber.Hooks, ...) are adapters that implement Observer; a Queue
// moves a slow observer to a goroutine of its own. Metrics are
// OpenTelemetry instruments built from a metric.MeterProvider given as an
// option (no-op by default, nothing global, nothing in init()), recorded
// by an observer of the same events; logging.Loop and statusz.EventLog
// are observers too. Traces come the same way: WithTracerProvider (and
// failback.WithTracerProvider) makes each attempt a span, nothing global
// (docs/tracing.md). Logging is zap through an injected *zap.Logger
// (package logging turns a loop's events into a handful of lines per
// outage).
//
// Time. Every wait selects on its context. Functions that decide take the
// time as an argument (like golang.org/x/time/rate); Retry and Retrier.Do
// read time.Now, which testing/synctest virtualises. Context deadlines are compared with the real clock.
//
// # The other packages
//
//   - subscriber: a Manager that subscribes until the registry acknowledges,
//     and confirms every subscription again after the registry restarts;
//     subscriber/nacos and subscriber/etcd adapt the registry clients, with
//     in-process servers for tests (nacostest, etcdtest).
//   - cluster and failback: a failback cluster invoker whose retries are
//     scheduled by due time with per-task jittered backoff, bounded tasks
//     and workers, and no silent loss.
//   - logging: a zap observer that logs a failing loop in a handful of lines;
//     subscriber/nacos/nacoslog brings nacos-sdk-go's own log under control.
//   - statusz: a status page (http.Handler) of subscriptions and failback
//     queues, and the recent events an EventLog observed, HTML and JSON.
//   - reboundhttp: an http.RoundTripper whose requests are retried by this
//     engine, one Retrier per host, never resending a request whose outcome
//     is unknown unless it is idempotent or keyed.
//
// # Metrics
//
// WithMeterProvider here, subscriber.WithMeterProvider,
// failback.WithMeterProvider and reboundgrpc.WithMeterProvider record these
// instruments, on the meter
// "github.com/rebound-go/rebound" (the one table; docs/observability.md has it with
// the details):
//
//	rebound.retry.attempts                counter, observable        {attempt}       outcome=success|retry|gave_up|throttled, component
//	rebound.retry.delay                   histogram                  s               component
//	rebound.limiter.wait                  histogram                  s               component
//	rebound.subscriber.subscriptions      up-down counter, observable {subscription} state=pending|subscribed|retrying|held|stopped
//	rebound.subscriber.updates            counter                    {update}        result=delivered|duplicate|empty_held|stale
//	rebound.subscriber.confirmations      counter                    {confirmation}  reason=subscribe|evidence
//	rebound.subscriber.registry.connected up-down counter, observable {connection}   -
//	rebound.failback.queue                up-down counter, observable {call}         -
//	rebound.failback.calls                counter, observable        {call}          outcome=succeeded|gave_up|dropped
//	rebound.grpc.subscriptions            up-down counter, observable {subscription} -
//	rebound.grpc.resolvers                up-down counter, observable {resolver}     -
//	rebound.grpc.resolve_now              counter, observable        {call}          result=refreshed|coalesced
//	rebound.grpc.rejected_states          counter, observable        {state}         -
//
// Every attribute takes its values from the small fixed set shown
// (component: subscriber, failback or reboundgrpc for rebound's own loops,
// or what the user passes to WithMeterProvider); free text such as an
// adapter's words for its evidence goes to logs, Status and hooks, never
// to an attribute (docs/metric-attributes.md).
//
// Concurrency: Policy is a value and safe to share; Retrier, RetryBudget,
// AdaptiveThrottle and Retry are safe for concurrent use; a Schedule and a
// backoff.BackOff from NewBackOff belong to one loop and are not.
package rebound
