package subscriber

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

// nopRegistry acknowledges every Subscribe.
type nopRegistry struct{}

func (nopRegistry) Subscribe(context.Context, Key, Sink) error   { return nil }
func (nopRegistry) Unsubscribe(context.Context, Key, Sink) error { return nil }

// queued reports whether e is in the scheduler's heap.
func queued(m *Manager, e *entry) bool {
	m.sched.mu.Lock()
	defer m.sched.mu.Unlock()
	return e.index >= 0
}

// TestRunCtlFollowsTable walks every state × event pair of both tables on
// a real subscription: placed in the state (with what the state holds: the
// retry timer of a state that waits for it, the evidence cap of awaiting,
// the cancel func of an attempt in flight), given the event by
// runCtl.step, it must end in the table's next state and hold what that
// state holds, and nothing it does not (no retry timer outside a timer
// wait, no evidence cap outside awaiting, no timer at all once stopped, a
// new attempt's cancel func after a launch).
func TestRunCtlFollowsTable(t *testing.T) {
	walked := 0
	defer func() {
		if want := 2 * int(numRunStates-1) * int(numRunEvents); walked != want {
			t.Errorf("walked %d pairs, want %d", walked, want)
		}
	}()
	for _, confirms := range []bool{false, true} {
		cells(func(st runState, ev runEvent) {
			walked++
			name := "plain/" + st.String() + "/" + ev.String()
			if confirms {
				name = "confirming/" + st.String() + "/" + ev.String()
			}
			t.Run(name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					m, err := New(nopRegistry{}, WithLimiter(nil))
					if err != nil {
						t.Fatal(err)
					}
					defer m.Close()
					m.table = tableFor(confirms)
					s := newSubscription(m, context.Background(), Key{Service: "svc"}, func([]Instance) {})
					m.mu.Lock()
					m.nextID++
					s.id = m.nextID
					m.subs[s.id] = s
					m.mu.Unlock()

					// Off the scheduler's grid: a timer set at now fires on
					// the next multiple of timerSlack, after the checks
					// (virtual time stands still while this goroutine runs).
					time.Sleep(timerSlack / 2)
					s.mu.Lock()
					now := time.Now()
					s.state = StateRetrying
					s.run.st = st
					if _, due := st.due(); due {
						s.setTimer(timerRetry, now.Add(time.Hour))
					}
					if st == rsAwaiting {
						s.run.confDL = now.Add(time.Hour)
						s.setTimer(timerConfirm, s.run.confDL)
					}
					var attemptCtx context.Context
					if st.inFlight() {
						attemptCtx, s.run.cancel = context.WithCancel(context.Background())
						// An attempt in flight is one the engine admitted.
						s.run.sch = m.retrier.NewSchedule(now)
						s.run.att, _ = s.run.sch.Admit(now)
					}
					if st == rsStopped {
						s.stopped = true
					}
					// The timer events come from a firing: the entry left the heap.
					switch ev {
					case evConfirmTimeout:
						s.cancelTimer(timerConfirm)
					case evAdmitted, evTokenWait, evDeferred:
						s.cancelTimer(timerRetry)
					}
					tr := m.table[st][ev]
					out := s.run.step(s, ev, stepIn{now: now, reason: errors.New("test"), delay: time.Minute, confirm: "test"})
					next := resolved(st, tr)
					where := func() string { return st.String() + " × " + ev.String() + " -> " + next.String() }
					if s.run.st != next {
						t.Errorf("%s: state %v", where(), s.run.st)
					}
					_, due := next.due()
					if out.gaveUp != nil {
						t.Errorf("%s: gave up: %v", where(), out.gaveUp)
					}
					if got := queued(m, &s.retryT); got != due {
						t.Errorf("%s: retry timer queued %v, the state waits for it: %v", where(), got, due)
					}
					confirmCap := s.aux != nil && queued(m, &s.aux.timers[timerConfirm-1])
					if confirmCap != (next == rsAwaiting && !s.run.confDL.IsZero()) {
						t.Errorf("%s: evidence cap queued %v (deadline %v)", where(), confirmCap, s.run.confDL)
					}
					if next == rsStopped && ev == evStop && (queued(m, &s.retryT) || confirmCap || s.run.sch != nil) {
						t.Errorf("%s: a timer or a Schedule left behind", where())
					}
					if attemptCtx != nil && tr.do&aCancelAttempt != 0 && attemptCtx.Err() == nil {
						t.Errorf("%s: the attempt in flight was not cancelled", where())
					}
					if next.inFlight() && !st.inFlight() && (s.run.cancel == nil || s.run.total != 1) {
						t.Errorf("%s: no attempt started (%d attempts)", where(), s.run.total)
					}
					if next == rsAwaiting && ev == evLost && !s.run.confDL.IsZero() {
						t.Errorf("%s: a deadline for evidence while the connection is down", where())
					}
					if next == rsAwaiting && ev == evReconnected && !s.run.confDL.Equal(now.Add(m.opts.confirmCap)) {
						t.Errorf("%s: evidence deadline %v, want WithConfirmTimeout after the reconnect", where(), s.run.confDL)
					}
					if out.acked != (tr.do&(aAck|aAckEvidence) != 0) {
						t.Errorf("%s: acked %v", where(), out.acked)
					}
					if out.acked && s.state != StateSubscribed {
						t.Errorf("%s: acknowledged but %v", where(), s.state)
					}
					if tr.do&aRetrying != 0 && s.state != StateRetrying {
						t.Errorf("%s: retrying but %v", where(), s.state)
					}
					s.mu.Unlock()
					// A launch enqueued the attempt for the scheduler
					// goroutine, which runs it after the firing that
					// launched it; here no firing did: wake it.
					m.sched.wait.Wake()
					// A subscription made stopped above has not finished:
					// finish it (Close waits until every subscription is done).
					if s.stop(ErrUnsubscribed) || st == rsStopped {
						s.finish()
					}
				})
			})
		})
	}
}
