package failback

import (
	"context"

	"go.uber.org/zap"

	"github.com/rebound-go/rebound"
)

// Shutdown stops taking calls and lets the queued ones finish, until ctx
// is done; then it stops as Close does. It returns nil after a completed
// drain, ctx.Err() if ctx ended it first, ErrClosed once Close stopped it
// (like net/http.Server). From an observer it returns
// rebound.ErrCalledFromCallback at once and finishes in the background.
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

// Close stops the invoker at once: running retries are cancelled and
// queued calls dropped with ErrClosed (kept in the Store, if any). It
// returns when every call has been reported and the goroutines have
// exited. From an observer it returns rebound.ErrCalledFromCallback at once
// and finishes in the background. Close is idempotent.
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
	f.dropped[dropIndex(dropClosed)] += uint64(len(pending))
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
		f.droppedReport(t, dropClosed, now)
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
