package etcd

import (
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/subscriber"
)

// Registry adapts an etcd v3 client to subscriber.Registry and
// subscriber.ConnectionMonitor. Create it with New; the zero value is not
// usable. It is safe for concurrent use.
//
// Each subscription runs one goroutine (its watch) from a successful
// Subscribe to its Unsubscribe, the next Subscribe of the same Sink, the
// end of the watch, or Close. The Registry does not own the client: close
// the Manager, then the Registry, then the client.
type Registry struct {
	client *clientv3.Client
	opts   registryOptions
	layout Layout
	log    *zap.Logger

	ctx    context.Context // parent of every watch; cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // every watch goroutine

	everReady atomic.Bool // the connection was ready once (see waitReady)

	mu      sync.Mutex
	closed  bool
	watches map[subscriber.Sink]*watch
}

// New returns a Registry reading instances through client. It makes no
// request: a cluster that is down is reported by the attempts. A nil
// client or a bad option is a *rebound.ArgumentError.
func New(client *clientv3.Client, opts ...Option) (*Registry, error) {
	if client == nil {
		return nil, argErr("New", "client", "must not be nil")
	}
	o, err := newRegistryOptions(opts)
	if err != nil {
		return nil, err
	}
	r := &Registry{
		client:  client,
		opts:    o,
		layout:  o.resolvedLayout(),
		log:     o.log.With(zap.String("component", "subscriber/etcd")),
		watches: make(map[subscriber.Sink]*watch),
	}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	return r, nil
}

// Subscribe makes one attempt to subscribe sink to key's instances (see
// "Subscribing" in the package documentation): a linearizable Get, then a
// watch from the next revision. It returns once the watch exists and the
// Get's list is delivered; a second call for sink replaces the watch. It
// is bounded by ctx, the attempt timeout (5 s) and Close, and fails at once
// without a usable connection.
func (r *Registry) Subscribe(ctx context.Context, key subscriber.Key, sink subscriber.Sink) error {
	if sink == nil {
		return rebound.Permanent(argErr("Registry.Subscribe", "sink", "must not be nil"))
	}
	prefix, err := r.layout.ServicePrefix(key)
	if err != nil {
		return rebound.Permanent(err)
	}
	if r.isClosed() {
		return opErr("get", prefix, closedError{})
	}
	ctx, cancel := context.WithTimeout(ctx, r.opts.timeout)
	defer cancel()
	// Close ends the attempt too.
	defer context.AfterFunc(r.ctx, cancel)()
	if err := r.waitReady(ctx); err != nil {
		return r.classify("get", prefix, err)
	}

	// From here on the previous watch of sink, if any, is gone: if this
	// attempt fails, the Manager tries again.
	lastRev := r.stopWatch(sink)

	resp, err := r.client.Get(clientv3.WithRequireLeader(ctx), prefix, clientv3.WithPrefix())
	if err != nil {
		return r.classify("get", prefix, err)
	}
	st := newState(r.layout, prefix, key.Clusters, r.log)
	st.load(resp)
	if lastRev > st.rev {
		// Only a cluster restored from an older backup or wiped and
		// recreated goes back in time; the Get's list is the truth now.
		r.log.Warn("etcd revision went back; delivering the current list",
			zap.String("prefix", prefix), zap.Int64("previous", lastRev), zap.Int64("current", st.rev))
	}

	// The watch outlives the attempt, so its context is the Registry's,
	// but until it is created the attempt's ctx bounds it: clientv3's
	// Watch blocks until the server answers the creation, and while its
	// stream reconnects it waits for a connection on a context nothing
	// else cancels (issue 14, item 13).
	wctx, wcancel := context.WithCancelCause(clientv3.WithRequireLeader(r.ctx))
	stopBound := context.AfterFunc(ctx, func() { wcancel(nil) })
	wch := r.client.Watch(wctx, prefix, clientv3.WithPrefix(),
		clientv3.WithRev(st.rev+1), clientv3.WithCreatedNotify())
	err = awaitCreated(ctx, wch)
	if !stopBound() {
		// ctx ended first: the watch is being cancelled, whatever
		// awaitCreated saw. A creation that raced with the end of the
		// attempt is not used.
		wcancel(nil)
		return r.classify("watch", prefix, ctx.Err())
	}
	if err != nil {
		wcancel(nil)
		return r.classify("watch", prefix, err)
	}

	w := &watch{cancel: wcancel, done: make(chan struct{}), st: st}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		wcancel(nil)
		return opErr("watch", prefix, closedError{})
	}
	r.watches[sink] = w
	r.wg.Add(1)
	r.mu.Unlock()

	// Deliver the snapshot before the goroutine reading the watch starts:
	// updates reach the sink in revision order.
	sink.Update(st.list())
	go r.run(wctx, w, wch, sink)
	return nil
}

// awaitCreated waits for the response that confirms the creation of a
// watch started with WithCreatedNotify.
func awaitCreated(ctx context.Context, wch clientv3.WatchChan) error {
	select {
	case wr, ok := <-wch:
		if !ok {
			return errWatchClosed
		}
		if err := wr.Err(); err != nil {
			return err
		}
		if !wr.Created {
			// Cannot happen with WithCreatedNotify: the first response
			// is the creation.
			return errors.New("etcd: watch answered before it was created")
		}
		return nil
	case <-ctx.Done():
	}
	return ctx.Err()
}

// Unsubscribe stops the watch of sink, if any, and waits for its goroutine
// to end (bounded by ctx). After it returns, sink is not called again. It
// makes no request to etcd (the watch's cancellation is sent by the
// client) and returns nil, or ctx's error if ctx ended first.
func (r *Registry) Unsubscribe(ctx context.Context, key subscriber.Key, sink subscriber.Sink) error {
	r.mu.Lock()
	w := r.watches[sink]
	delete(r.watches, sink)
	r.mu.Unlock()
	if w == nil {
		return nil
	}
	w.cancel(nil)
	select {
	case <-w.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// stopWatch stops the watch of sink, if any, waits for its goroutine and
// returns the last revision it had applied (0 if none).
func (r *Registry) stopWatch(sink subscriber.Sink) int64 {
	r.mu.Lock()
	w := r.watches[sink]
	delete(r.watches, sink)
	r.mu.Unlock()
	if w == nil {
		return 0
	}
	w.cancel(nil)
	<-w.done // the goroutine never blocks: it ends promptly
	return w.st.rev
}

// Close stops every watch and waits for their goroutines; attempts in
// flight end, and Subscribe fails from now on with an error matching
// rebound.ErrClosed. It makes no request and does not close the
// client. It is idempotent and returns nil; close the Manager first.
func (r *Registry) Close() error {
	r.mu.Lock()
	r.closed = true
	watches := r.watches
	r.watches = make(map[subscriber.Sink]*watch)
	r.mu.Unlock()
	// Each running watch first, with its reason (a cancelled parent would
	// hide it), then the Registry's context: attempts in flight and
	// watches being created end too.
	for _, w := range watches {
		w.cancel(errDropped{opErr("watch", w.st.prefix, closedError{})})
	}
	r.cancel()
	r.wg.Wait()
	return nil
}

// errDropped is the cause of a watch cancelled by Close: its goroutine
// passes err to Sink.Resubscribe. Other cancellations (Unsubscribe, a new
// Subscribe, a lost connection) are silent.
type errDropped struct{ err error }

func (e errDropped) Error() string { return e.err.Error() }
func (e errDropped) Unwrap() error { return e.err }

// dropWatches cancels every running watch silently. The watches stay in
// the map (stopped), so that the next Subscribe of each sink still
// learns the revision it had reached.
func (r *Registry) dropWatches() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, w := range r.watches {
		w.cancel(nil)
	}
}

func (r *Registry) isClosed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.closed || r.client.Ctx().Err() != nil
}

func (r *Registry) classify(op, key string, err error) error {
	return classify(op, key, err, r.isClosed())
}

// waitReady returns nil once the client's connection is ready, and an
// error matching rebound.ErrClosed if it is shut down. Otherwise it
// returns errNotConnected: at once when the connection is in
// TRANSIENT_FAILURE, or when it was ready before (it is reconnecting: a
// restarting member may accept connections long before it serves, and
// attempts waiting for it would all proceed together the moment it does,
// whatever limiter let them start); and when ctx ends while the client
// makes its first connection.
func (r *Registry) waitReady(ctx context.Context) error {
	conn := r.client.ActiveConnection()
	if conn == nil {
		return nil // a client without a connection (NewCtxClient): let the call decide
	}
	for {
		s := conn.GetState()
		switch s {
		case connectivity.Ready:
			r.everReady.Store(true)
			return nil
		case connectivity.TransientFailure:
			return errNotConnected
		case connectivity.Shutdown:
			return closedError{}
		case connectivity.Idle:
			conn.Connect()
		}
		if r.everReady.Load() {
			return errNotConnected
		}
		if !conn.WaitForStateChange(ctx, s) {
			return errNotConnected
		}
	}
}

// ConfirmsReconnects implements subscriber.ConnectionMonitor: false, the
// Manager confirms every subscription after a reconnect.
func (r *Registry) ConfirmsReconnects() bool { return false }

// MonitorConnection implements subscriber.ConnectionMonitor from the
// client's gRPC connection, usable while any member is. After reporting
// a loss (false) it stops every watch without calling its sink; the caller
// confirms every subscription on the connect (true). It returns nil when ctx is
// done, the Registry is closed or the connection is shut down.
func (r *Registry) MonitorConnection(ctx context.Context, report func(connected bool)) error {
	conn := r.client.ActiveConnection()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(r.ctx, cancel)
	defer stop()
	if conn == nil {
		<-ctx.Done()
		return nil
	}
	return r.monitor(ctx, conn, report)
}

func (r *Registry) monitor(ctx context.Context, conn *grpc.ClientConn, report func(connected bool)) error {
	var seenReady, down bool
	for {
		s := conn.GetState()
		switch s {
		case connectivity.Ready:
			seenReady = true
			r.everReady.Store(true)
			if down {
				down = false
				report(true)
			}
		case connectivity.Shutdown:
			return nil
		default:
			if s == connectivity.Idle {
				conn.Connect()
			}
			if seenReady && !down {
				down = true
				report(false)
				// The Manager confirms every subscription (paced by its
				// limiter) after the connect report (true) that this loop
				// makes before the connection is usable again: let the
				// watches go now, or the client would resume them all at
				// once on reconnection, only for them to be replaced.
				r.dropWatches()
			}
		}
		if !conn.WaitForStateChange(ctx, s) {
			return nil
		}
	}
}

// watch is the running watch of one sink.
type watch struct {
	cancel context.CancelCauseFunc // a nil cause stops it silently
	done   chan struct{}           // closed when the goroutine ends
	st     *state                  // owned by the goroutine until done is closed
}

// run reads the watch of one sink until it is cancelled or fails.
func (r *Registry) run(ctx context.Context, w *watch, wch clientv3.WatchChan, sink subscriber.Sink) {
	defer r.wg.Done()
	defer close(w.done)
	for {
		var (
			wr clientv3.WatchResponse
			ok bool
		)
		select {
		case <-ctx.Done():
		case wr, ok = <-wch:
		}
		if ctx.Err() != nil {
			// Stopped: silently by Unsubscribe, a new Subscribe or a lost
			// connection, with a resubscription request by Close.
			var d errDropped
			if errors.As(context.Cause(ctx), &d) {
				sink.Resubscribe(d.err)
			}
			return
		}
		var reason error
		switch {
		case !ok:
			reason = errWatchClosed
		case wr.Err() != nil:
			reason = wr.Err()
		}
		if reason != nil {
			err := r.classify("watch", w.st.prefix, reason)
			r.log.Warn("watch ended; resubscribing",
				zap.String("prefix", w.st.prefix), zap.Int64("revision", w.st.rev), zap.Error(err))
			sink.Resubscribe(err)
			return
		}
		if w.st.apply(wr.Events) {
			sink.Update(w.st.list())
		}
	}
}

// compile-time checks
var (
	_ subscriber.Registry          = (*Registry)(nil)
	_ subscriber.ConnectionMonitor = (*Registry)(nil)
	_ subscriber.Reconciler        = (*Registry)(nil)
	_ io.Closer                    = (*Registry)(nil)
)

// Lookup implements subscriber.Reconciler: one linearizable Get of key's
// instances, bounded and classified as Subscribe's attempts. It keeps
// nothing and starts no watch.
func (r *Registry) Lookup(ctx context.Context, key subscriber.Key) ([]subscriber.Instance, error) {
	prefix, err := r.layout.ServicePrefix(key)
	if err != nil {
		return nil, rebound.Permanent(err)
	}
	if r.isClosed() {
		return nil, opErr("get", prefix, closedError{})
	}
	ctx, cancel := context.WithTimeout(ctx, r.opts.timeout)
	defer cancel()
	defer context.AfterFunc(r.ctx, cancel)()
	if err := r.waitReady(ctx); err != nil {
		return nil, r.classify("get", prefix, err)
	}
	resp, err := r.client.Get(clientv3.WithRequireLeader(ctx), prefix, clientv3.WithPrefix())
	if err != nil {
		return nil, r.classify("get", prefix, err)
	}
	st := newState(r.layout, prefix, key.Clusters, r.log)
	st.load(resp)
	return st.list(), nil
}
