package subscriber

// The retry control of a subscription is a state machine: runState × runEvent
// → next runState plus actions, written out below as a table. runCtl.step
// (retry.go) looks the pair up and runs the actions in their bit order; a
// pair the table says nothing about does not exist (runtable_test.go walks
// every pair of both tables).

// runState is the state of a subscription's retry control.
type runState uint8

const (
	_                 runState = iota // the zero state: a table cell left empty
	rsNew                             // created, first attempt not started
	rsSubscribed                      // confirmed; nothing scheduled or in flight
	rsAwaiting                        // waiting for a confirming adapter's evidence (until a deadline, or none while the connection is down)
	rsScheduled                       // the first attempt of a run is due at the retry timer (after a disruption)
	rsBackoff                         // a retry after a failure is due at the retry timer
	rsQueued                          // an admitted attempt waits for its limiter token
	rsRefresh                         // a Refresh attempt of a subscribed subscription is due at the retry timer
	rsRefreshQueued                   // a Refresh attempt waits for its limiter token
	rsInFlight                        // a Registry.Subscribe call of a run is running
	rsInFlightAgain                   // the same, disrupted meanwhile: a new attempt follows it at once
	rsRefreshInFlight                 // the Registry.Subscribe call of a Refresh is running
	rsStopped                         // stopped for good
	numRunStates
)

var runStateNames = [numRunStates]string{"", "new", "subscribed", "awaiting", "scheduled", "backoff", "queued",
	"refresh", "refresh-queued", "in-flight", "in-flight-again", "refresh-in-flight", "stopped"}

func (s runState) String() string { return runStateNames[s] }

// due reports whether the state waits for the retry timer, and which
// admission the attempt due then asks for.
func (s runState) due() (admission, bool) {
	switch s {
	case rsScheduled, rsRefresh:
		return admitFirst, true
	case rsBackoff:
		return admitRetry, true
	case rsQueued, rsRefreshQueued:
		return admitQueued, true
	}
	return 0, false
}

// inFlight reports whether a Registry.Subscribe call runs in the state.
func (s runState) inFlight() bool {
	return s == rsInFlight || s == rsInFlightAgain || s == rsRefreshInFlight
}

// runEvent is what happens to a subscription's retry control.
type runEvent uint8

const (
	evStart          runEvent = iota // Subscribe: the first attempt starts
	evAdmitted                       // the attempt due at the retry timer may be sent now
	evTokenWait                      // it was admitted and waits stepIn.delay for its limiter token
	evDeferred                       // it was refused locally (budget, throttle): not sent, asked again after stepIn.delay
	evSucceeded                      // the Registry.Subscribe call in flight succeeded
	evFailed                         // it failed with a transient error (stepIn.reason)
	evAborted                        // it was cancelled by a reconnect
	evLost                           // ConnectionMonitor: Disconnected
	evReconnected                    // ConnectionMonitor: Connected
	evResubscribe                    // Sink.Resubscribe, or a reconciliation found a difference
	evConfirmed                      // Sink.Confirmed: the adapter's evidence
	evConfirmTimeout                 // the safety cap on the evidence passed
	evRefresh                        // Refresh (or a failed Refresh lookup): confirm by resubscribing
	evStop                           // Unsubscribe, the Subscribe context, Close, a permanent error
	numRunEvents
)

var runEventNames = [numRunEvents]string{"start", "admitted", "token-wait", "deferred", "succeeded", "failed",
	"aborted", "lost", "reconnected", "resubscribe", "confirmed", "confirm-timeout", "refresh", "stop"}

func (e runEvent) String() string { return runEventNames[e] }

// runAction is a set of actions of a transition, run in bit order.
type runAction uint32

const (
	aResetAttempts runAction = 1 << iota // Status.Attempts counts a new confirmation from 0
	aRetrying                            // the state becomes StateRetrying (stepIn.reason)
	aFailure                             // record the failed attempt (lastErr, StateRetrying)
	aSucceeded                           // the attempt succeeded, but another follows: close Ready, clear lastErr, end the run
	aCancelAttempt                       // cancel the Registry.Subscribe call in flight (its connection is gone)
	aCancelConfirm                       // cancel the evidence cap timer
	aCancelRetry                         // cancel the retry timer, give back a token held
	aNotConfirmed                        // no evidence came: lastErr = errNotConfirmed
	aNewRun                              // a new run of the Schedule: delays from the first step
	aTimerNow                            // the retry timer at once
	aTimerFirst                          // the retry timer after the Schedule's first (jittered) delay
	aTimerAt                             // the retry timer after stepIn.delay
	aBackoff                             // the retry timer after the Schedule's next delay for stepIn.reason (a Schedule may stop)
	aDeferred                            // record an attempt deferred locally
	aAwait                               // wait for evidence, no deadline
	aAwaitCap                            // wait for evidence until now + WithConfirmTimeout
	aAck                                 // acknowledged by Registry.Subscribe: confirmed
	aAckEvidence                         // confirmed by the adapter's evidence
	aLaunch                              // start an attempt on the scheduler goroutine
	aLaunchNow                           // start the first attempt in a goroutine of its own
	aStop                                // cancel every timer, the attempt and the Lookup in flight, give back a token
	numRunActions  = iota
)

var runActionNames = [numRunActions]string{"reset-attempts", "retrying", "failure", "succeeded", "cancel-attempt",
	"cancel-confirm", "cancel-retry", "not-confirmed", "new-run", "timer-now", "timer-first", "timer-at",
	"backoff", "deferred", "await", "await-cap", "ack", "ack-evidence", "launch", "launch-now", "stop"}

// transition is a table cell: the next state (same: stay) and the actions.
type transition struct {
	next runState
	do   runAction
}

// same as a next state keeps the current one.
const same = numRunStates

// ignore is a transition that changes nothing.
var ignore = transition{next: same}

func to(next runState, do runAction) transition { return transition{next, do} }

// runTable is the retry control of a Manager whose Registry does not
// confirm reconnects (no ConnectionMonitor, or ConfirmsReconnects false).
var runTable = [numRunStates][numRunEvents]transition{
	rsNew: {
		evStart: to(rsInFlight, aLaunchNow), evAdmitted: ignore, evTokenWait: ignore, evDeferred: ignore,
		evSucceeded: ignore, evFailed: ignore, evAborted: ignore,
		// Disrupted before its first attempt: the first attempt is still to come.
		evLost: ignore, evReconnected: ignore, evResubscribe: ignore,
		evConfirmed: ignore, evConfirmTimeout: ignore, evRefresh: ignore, evStop: to(rsStopped, aStop),
	},
	rsSubscribed: {
		evStart: ignore, evAdmitted: ignore, evTokenWait: ignore, evDeferred: ignore,
		evSucceeded: ignore, evFailed: ignore, evAborted: ignore,
		// A lost connection is not worth an attempt at once (it would
		// fail): the first comes after a jittered delay.
		evLost:        to(rsScheduled, aResetAttempts|aRetrying|aNewRun|aTimerFirst),
		evReconnected: to(rsScheduled, aResetAttempts|aRetrying|aNewRun|aTimerNow),
		evResubscribe: to(rsScheduled, aResetAttempts|aRetrying|aNewRun|aTimerNow),
		evConfirmed:   ignore, evConfirmTimeout: ignore,
		evRefresh: to(rsRefresh, aTimerNow), evStop: to(rsStopped, aStop),
	},
	rsAwaiting: {
		evStart: ignore, evAdmitted: ignore, evTokenWait: ignore, evDeferred: ignore,
		evSucceeded: ignore, evFailed: ignore, evAborted: ignore,
		evLost: to(same, aAwait), evReconnected: to(same, aAwaitCap),
		evResubscribe:    to(rsScheduled, aCancelConfirm|aNewRun|aTimerNow),
		evConfirmed:      to(rsSubscribed, aCancelConfirm|aAckEvidence),
		evConfirmTimeout: to(rsScheduled, aNotConfirmed|aTimerNow),
		evRefresh:        ignore, evStop: to(rsStopped, aStop),
	},
	rsScheduled: {
		evStart: ignore, evAdmitted: to(rsInFlight, aLaunch), evTokenWait: to(rsQueued, aTimerAt),
		evDeferred:  to(rsBackoff, aTimerAt|aDeferred),
		evSucceeded: ignore, evFailed: ignore, evAborted: ignore,
		// Lost: keep the current wait. Otherwise cut it short: a new
		// run, at once (through the limiter).
		evLost: ignore, evReconnected: to(same, aNewRun|aTimerNow), evResubscribe: to(same, aNewRun|aTimerNow),
		evConfirmed: ignore, evConfirmTimeout: ignore, evRefresh: ignore, evStop: to(rsStopped, aStop),
	},
	rsBackoff: {
		evStart: ignore, evAdmitted: to(rsInFlight, aLaunch), evTokenWait: to(rsQueued, aTimerAt),
		evDeferred:  to(same, aTimerAt|aDeferred),
		evSucceeded: ignore, evFailed: ignore, evAborted: ignore,
		evLost: ignore, evReconnected: to(rsScheduled, aNewRun|aTimerNow), evResubscribe: to(rsScheduled, aNewRun|aTimerNow),
		evConfirmed: ignore, evConfirmTimeout: ignore, evRefresh: ignore, evStop: to(rsStopped, aStop),
	},
	rsQueued: {
		evStart: ignore, evAdmitted: to(rsInFlight, aLaunch), evTokenWait: to(same, aTimerAt),
		evDeferred:  to(rsBackoff, aTimerAt|aDeferred),
		evSucceeded: ignore, evFailed: ignore, evAborted: ignore,
		// A run queued at the limiter keeps its place: a cancelled
		// reservation cannot always return its token.
		evLost: ignore, evReconnected: ignore, evResubscribe: ignore,
		evConfirmed: ignore, evConfirmTimeout: ignore, evRefresh: ignore, evStop: to(rsStopped, aStop),
	},
	rsRefresh: {
		evStart: ignore, evAdmitted: to(rsRefreshInFlight, aLaunch), evTokenWait: to(rsRefreshQueued, aTimerAt),
		evDeferred:  to(same, aTimerAt|aDeferred),
		evSucceeded: ignore, evFailed: ignore, evAborted: ignore,
		// Disrupted: the Refresh becomes a confirmation run.
		evLost:        to(rsScheduled, aResetAttempts|aRetrying),
		evReconnected: to(rsScheduled, aResetAttempts|aRetrying|aNewRun|aTimerNow),
		evResubscribe: to(rsScheduled, aResetAttempts|aRetrying|aNewRun|aTimerNow),
		// A Refresh not sent yet: the evidence answers it.
		evConfirmed: to(rsSubscribed, aCancelRetry), evConfirmTimeout: ignore, evRefresh: ignore,
		evStop: to(rsStopped, aStop),
	},
	rsRefreshQueued: {
		evStart: ignore, evAdmitted: to(rsRefreshInFlight, aLaunch), evTokenWait: to(same, aTimerAt),
		evDeferred:  to(rsRefresh, aTimerAt|aDeferred),
		evSucceeded: ignore, evFailed: ignore, evAborted: ignore,
		evLost: to(rsQueued, aResetAttempts|aRetrying), evReconnected: to(rsQueued, aResetAttempts|aRetrying),
		evResubscribe: to(rsQueued, aResetAttempts|aRetrying),
		evConfirmed:   to(rsSubscribed, aCancelRetry), evConfirmTimeout: ignore, evRefresh: ignore,
		evStop: to(rsStopped, aStop),
	},
	rsInFlight: {
		evStart: ignore, evAdmitted: ignore, evTokenWait: ignore, evDeferred: ignore,
		evSucceeded: to(rsSubscribed, aAck), evFailed: to(rsBackoff, aFailure|aBackoff),
		evAborted: to(rsBackoff, aFailure|aBackoff),
		evLost:    ignore, evReconnected: to(rsInFlightAgain, aCancelAttempt), evResubscribe: to(rsInFlightAgain, 0),
		evConfirmed: ignore, evConfirmTimeout: ignore, evRefresh: ignore, evStop: to(rsStopped, aStop),
	},
	rsInFlightAgain: {
		evStart: ignore, evAdmitted: ignore, evTokenWait: ignore, evDeferred: ignore,
		// The attempt that follows is the first of a new run (a token of
		// its own): the engine admitted the one that ended, and asked
		// again for the same run it would admit it again, gates passed.
		evSucceeded: to(rsScheduled, aSucceeded|aTimerNow), evFailed: to(rsScheduled, aFailure|aNewRun|aTimerNow),
		// Cancelled by the reconnect: not a failure of the registry.
		evAborted: to(rsScheduled, aNewRun|aTimerNow),
		evLost:    ignore, evReconnected: to(same, aCancelAttempt), evResubscribe: ignore,
		evConfirmed: ignore, evConfirmTimeout: ignore, evRefresh: ignore, evStop: to(rsStopped, aStop),
	},
	rsRefreshInFlight: {
		evStart: ignore, evAdmitted: ignore, evTokenWait: ignore, evDeferred: ignore,
		evSucceeded: to(rsSubscribed, aAck), evFailed: to(rsBackoff, aFailure|aBackoff),
		evAborted: to(rsBackoff, aFailure|aBackoff),
		// Disrupted: a new confirmation, counted from the next call.
		evLost:        to(rsInFlight, aResetAttempts|aRetrying),
		evReconnected: to(rsInFlightAgain, aResetAttempts|aRetrying|aCancelAttempt),
		evResubscribe: to(rsInFlightAgain, aResetAttempts|aRetrying),
		evConfirmed:   ignore, evConfirmTimeout: ignore, evRefresh: ignore, evStop: to(rsStopped, aStop),
	},
	rsStopped: {
		evStart: ignore, evAdmitted: ignore, evTokenWait: ignore, evDeferred: ignore,
		evSucceeded: ignore, evFailed: ignore, evAborted: ignore,
		evLost: ignore, evReconnected: ignore, evResubscribe: ignore,
		evConfirmed: ignore, evConfirmTimeout: ignore, evRefresh: ignore, evStop: ignore,
	},
}

// confirmingRows are the cells in which a Manager whose Registry confirms
// reconnects (ConfirmsReconnects) differs from runTable: a disrupted
// subscription waits for the adapter's evidence instead of resubscribing.
var confirmingRows = map[[2]uint8]transition{
	{uint8(rsSubscribed), uint8(evLost)}:        to(rsAwaiting, aResetAttempts|aRetrying|aAwait),
	{uint8(rsSubscribed), uint8(evReconnected)}: to(rsAwaiting, aResetAttempts|aRetrying|aAwaitCap),
}

// confirmingTable is runTable with confirmingRows.
var confirmingTable = func() [numRunStates][numRunEvents]transition {
	t := runTable
	for k, tr := range confirmingRows {
		t[k[0]][k[1]] = tr
	}
	return t
}()

// tableFor returns the retry control of a Manager.
func tableFor(confirms bool) *[numRunStates][numRunEvents]transition {
	if confirms {
		return &confirmingTable
	}
	return &runTable
}
