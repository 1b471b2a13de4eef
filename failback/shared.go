package failback

import (
	"context"
	"errors"
	"time"

	"go.uber.org/zap"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/internal/admit"
)

// Claimer is a Store several Invokers share (package reboundpg): each
// claims due calls in batches, with a lease, instead of loading them all.
type Claimer interface {
	Store
	// Claim leases up to n due calls no live lease holds, with times on
	// this process's clock. next is when to claim again, also after an
	// error. Calls returned with an error are leased too: the Invoker
	// runs them.
	Claim(ctx context.Context, n int) (calls []StoredCall, next time.Duration, err error)
	// Notify receives when calls may have been added (nil or closed: no
	// signal).
	Notify() <-chan struct{}
	// Release stops renewing the lease of claimed call id, which the
	// Invoker will not run: it is claimed again when the lease ends.
	Release(id uint64)
}

// ErrLeaseLost is wrapped by a Claimer's Update when another Invoker took
// the call. The call is dropped with ErrClosed and stays in the Store.
var ErrLeaseLost = errors.New("failback: lease lost: another invoker claimed the call")

// claimRetry is how long the claim loop waits at least before it asks
// again when the Invoker holds WithMaxTasks calls already, or after a
// Claim that brought no call and failed or named no wait: never a
// busy-spin, whatever the Store.
const claimRetry = 100 * time.Millisecond

// startClaimer starts the claim loop if the Store is a Claimer; New calls
// it with the other goroutines.
func (f *Invoker) startClaimer() {
	if cl, ok := f.cfg.durable.store.(Claimer); ok {
		f.live.Add(1)
		go f.claimLoop(cl)
	}
}

// claimLoop claims due calls from a shared Store until Close, whenever the
// Store notifies it or the time the last claim named has passed.
func (f *Invoker) claimLoop(cl Claimer) {
	defer f.exit()
	timer := time.NewTimer(0)
	defer timer.Stop()
	failing, notifyClosed := false, false
	for {
		var notify <-chan struct{}
		if !notifyClosed {
			notify = cl.Notify()
		}
		select {
		case <-f.done:
			return
		case <-timer.C:
		case _, ok := <-notify:
			if !ok { // a closed channel is no signal: not a claim in a loop
				notifyClosed = true
				continue
			}
		}
		next, err := f.claimOnce(cl)
		switch {
		case err != nil && !failing:
			f.log.Warn("failback: store: claiming calls failed (retrying)", zap.Error(err))
		case err == nil && failing:
			f.log.Info("failback: store: claiming calls again")
		}
		failing = err != nil
		timer.Reset(max(next, 0))
	}
}

// claimOnce claims as many calls as the Invoker has room for and queues
// them, even those of a Claim that failed; it returns when to claim again.
func (f *Invoker) claimOnce(cl Claimer) (time.Duration, error) {
	f.mu.Lock()
	room := f.cfg.maxTasks - f.pendingLocked() - f.reserved
	open := f.state == stateOpen
	f.mu.Unlock()
	if !open {
		return time.Hour, nil // Shutdown drains what it holds; Close ends the loop
	}
	if room <= 0 {
		return claimRetry, nil
	}
	calls, next, err := claimCalls(f.baseCtx, cl, room)
	if len(calls) == 0 && (err != nil || next <= 0) {
		next = max(next, claimRetry)
	}
	codec := f.cfg.durable.codecOrDefault()
	now, wallNow := f.now(), time.Now()
	pn := admit.Normalized(f.cfg.policy).(rebound.Policy)
	maxWait := max(pn.Max, pn.MaxRetryAfter)
	tasks := make([]*task, 0, len(calls))
	for _, c := range calls {
		t, berr, _ := f.storedTask(codec, c, now, wallNow, maxWait)
		if berr != nil {
			f.claimedBad(cl, berr)
			continue
		}
		tasks = append(tasks, t)
	}
	f.mu.Lock()
	if f.state == stateOpen { // else they stay leased; the Store releases them
		for _, t := range tasks {
			f.offered++
			f.pushLocked(t)
		}
	}
	f.mu.Unlock()
	return next, err
}

// claimedBad sets aside a claimed call that cannot be loaded
// (WithQuarantine), or logs it and releases it: without quarantine it
// stays in the Store and is claimed again when its lease ends.
func (f *Invoker) claimedBad(cl Claimer, b *badRecordError) {
	if !f.cfg.durable.quarantine {
		f.releaseClaimed(cl, b.ID)
		f.log.Error("failback: claimed call cannot be loaded (failback.WithQuarantine sets it aside); it is claimed again when its lease ends",
			zap.Uint64("id", b.ID), zap.String("method", b.Method), zap.Error(b.Err))
		return
	}
	if err := cl.Quarantine(b.ID, b); err != nil {
		f.releaseClaimed(cl, b.ID)
		f.log.Error("failback: claimed call cannot be loaded nor quarantined; it is claimed again when its lease ends",
			zap.Uint64("id", b.ID), zap.String("method", b.Method), zap.Error(errors.Join(b, err)))
		return
	}
	f.mu.Lock()
	f.quarantined++
	f.mu.Unlock()
	f.log.Error("failback: stored call set aside: it cannot be loaded (quarantined in the store)",
		zap.Uint64("id", b.ID), zap.String("method", b.Method), zap.Error(b.Err))
}

// releaseClaimed is cl.Release with a panic logged: the call is left to
// its lease either way.
func (f *Invoker) releaseClaimed(cl Claimer, id uint64) {
	defer func() {
		if r := recover(); r != nil {
			f.log.Error("failback: store: releasing a claimed call failed",
				zap.Uint64("id", id), zap.Error(recovered("failback.Claimer.Release", r)))
		}
	}()
	cl.Release(id)
}

// claimCalls is cl.Claim with a panic returned as an error.
func claimCalls(ctx context.Context, cl Claimer, n int) (calls []StoredCall, next time.Duration, err error) {
	defer func() {
		if r := recover(); r != nil {
			calls, next, err = nil, time.Second, recovered("failback.Claimer.Claim", r)
		}
	}()
	return cl.Claim(ctx, n)
}
