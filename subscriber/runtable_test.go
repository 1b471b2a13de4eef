package subscriber

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var updateTable = flag.Bool("update-runtable", false, "rewrite testdata/runtable.golden from the table")

// cells calls f for every state × event pair of the retry control.
func cells(f func(st runState, ev runEvent)) {
	for st := runState(1); st < numRunStates; st++ {
		for ev := runEvent(0); ev < numRunEvents; ev++ {
			f(st, ev)
		}
	}
}

func (a runAction) String() string {
	if a == 0 {
		return "-"
	}
	var names []string
	for i := range numRunActions {
		if a&(1<<i) != 0 {
			names = append(names, runActionNames[i])
		}
	}
	return strings.Join(names, "|")
}

// resolved is the state after tr from st.
func resolved(st runState, tr transition) runState {
	if tr.next == same {
		return st
	}
	return tr.next
}

// render writes the table as text, one line per cell; with diffOnly, only
// the cells that differ from runTable.
func render(b *strings.Builder, t *[numRunStates][numRunEvents]transition, diffOnly bool) {
	cells(func(st runState, ev runEvent) {
		tr := t[st][ev]
		if diffOnly && tr == runTable[st][ev] {
			return
		}
		next := "(same)"
		if tr.next != same {
			next = tr.next.String()
		}
		fmt.Fprintf(b, "%-18s %-16s -> %-18s %v\n", st, ev, next, tr.do)
	})
}

// TestRunTableGolden walks every state × event pair of both tables: each
// has a row, and the table reads as testdata/runtable.golden (the retry
// control written out; regenerate with -update-runtable after a reviewed
// change). A state or event added without its rows, or without a name,
// fails here.
func TestRunTableGolden(t *testing.T) {
	for i, n := range runStateNames[1:] {
		if n == "" {
			t.Errorf("runState %d has no name", i+1)
		}
	}
	for i, n := range runEventNames {
		if n == "" {
			t.Errorf("runEvent %d has no name", i)
		}
	}
	for i, n := range runActionNames {
		if n == "" {
			t.Errorf("runAction bit %d has no name", i)
		}
	}
	pairs := 0
	for _, tab := range []*[numRunStates][numRunEvents]transition{&runTable, &confirmingTable} {
		cells(func(st runState, ev runEvent) {
			pairs++
			tr := tab[st][ev]
			if tr.next == 0 {
				t.Errorf("%v × %v: no row (write ignore for a pair that changes nothing)", st, ev)
			}
			if tr.do>>numRunActions != 0 {
				t.Errorf("%v × %v: unknown action bits %b", st, ev, tr.do)
			}
		})
	}
	if want := 2 * int(numRunStates-1) * int(numRunEvents); pairs != want {
		t.Fatalf("walked %d pairs, want %d", pairs, want)
	}

	var b strings.Builder
	b.WriteString("# The retry control of a subscription: state × event -> next state, actions (runtable.go).\n")
	b.WriteString("# Registry without confirmed reconnects:\n")
	render(&b, &runTable, false)
	b.WriteString("# A ConnectionMonitor that confirms reconnects differs in:\n")
	render(&b, &confirmingTable, true)
	path := filepath.Join("testdata", "runtable.golden")
	if *updateTable {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := b.String(); got != string(want) {
		gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
		for i := range max(len(gl), len(wl)) {
			var g, w string
			if i < len(gl) {
				g = gl[i]
			}
			if i < len(wl) {
				w = wl[i]
			}
			if g != w {
				t.Errorf("line %d:\n got  %s\n want %s", i+1, g, w)
			}
		}
	}
}

// TestRunTableRules walks every state × event pair of both tables and
// checks the rules the retry control keeps, whatever the cell.
func TestRunTableRules(t *testing.T) {
	const timers = aTimerNow | aTimerFirst | aTimerAt | aBackoff
	launches := aLaunch | aLaunchNow
	attemptEnds := map[runEvent]bool{evSucceeded: true, evFailed: true, evAborted: true}
	disruptions := map[runEvent]bool{evLost: true, evReconnected: true, evResubscribe: true}
	for name, tab := range map[string]*[numRunStates][numRunEvents]transition{"plain": &runTable, "confirming": &confirmingTable} {
		cells(func(st runState, ev runEvent) {
			tr := tab[st][ev]
			next := resolved(st, tr)
			_, dueFrom := st.due()
			_, dueTo := next.due()
			fail := func(rule string) { t.Errorf("%s: %v × %v -> %v %v: %s", name, st, ev, next, tr.do, rule) }

			switch {
			case st == rsStopped:
				if tr != ignore {
					fail("stopped is final")
				}
				return
			case ev == evStop:
				if next != rsStopped || tr.do != aStop {
					fail("stop leads to stopped, cancelling everything")
				}
				return
			}
			if next == rsStopped {
				fail("only stop stops")
			}
			if next == rsNew && st != rsNew {
				fail("no way back to new")
			}
			// An attempt starts by a launch, and only from a state with
			// none in flight.
			if launched := tr.do&launches != 0; launched != (next.inFlight() && !st.inFlight()) {
				fail("an attempt in flight comes with exactly one launch")
			}
			if tr.do&launches == launches {
				fail("two launches")
			}
			if (tr.do&aLaunchNow != 0) != (ev == evStart && st == rsNew) {
				fail("the first attempt, and only it, starts in its own goroutine")
			}
			if ev == evStart && st != rsNew && tr != ignore {
				fail("started twice")
			}
			if tr.do&aLaunch != 0 && ev != evAdmitted {
				fail("an attempt is launched only when admitted")
			}
			// An attempt in flight is forgotten only with its result.
			if st.inFlight() && !next.inFlight() && !attemptEnds[ev] {
				fail("an attempt in flight ends only with its result")
			}
			if attemptEnds[ev] {
				if !st.inFlight() && tr != ignore {
					fail("an attempt's result without an attempt")
				}
				if st.inFlight() && next.inFlight() {
					fail("the attempt ended: the state must say so")
				}
			}
			// Admission answers belong to a state waiting for the timer.
			if (ev == evAdmitted || ev == evTokenWait || ev == evDeferred) && !dueFrom && tr != ignore {
				fail("an admission answer in a state that waits for none")
			}
			if ev == evTokenWait && tr.next != same && next != rsQueued && next != rsRefreshQueued {
				fail("a token wait queues")
			}
			if (next == rsQueued || next == rsRefreshQueued) && st != next && ev != evTokenWait &&
				st != rsRefreshQueued {
				fail("queued only with a token held")
			}
			// A state that waits for the retry timer has it set.
			if dueTo && !dueFrom && tr.do&timers == 0 {
				fail("waits for the retry timer without setting it")
			}
			if tr.do&timers&(tr.do&timers-1) != 0 {
				fail("two retry timers")
			}
			if tr.do&aBackoff != 0 && ev != evFailed && ev != evAborted {
				fail("a backoff delay without a failure")
			}
			if tr.do&aFailure != 0 && ev != evFailed && ev != evAborted {
				fail("a failure recorded without one")
			}
			if ev == evFailed && st.inFlight() && tr.do&aFailure == 0 {
				fail("a failed attempt is recorded")
			}
			if tr.do&aTimerAt != 0 && ev != evTokenWait && ev != evDeferred {
				fail("timer-at without a delay")
			}
			if (tr.do&aDeferred != 0) != (ev == evDeferred && tr != ignore) {
				fail("a deferral is recorded, and only a deferral")
			}
			if tr.do&aTimerFirst != 0 && tr.do&aNewRun == 0 {
				fail("the first delay of a run is drawn after its reset")
			}
			// Leaving a wait cancels what it waited for.
			if dueFrom && !dueTo && !next.inFlight() && tr.do&aCancelRetry == 0 {
				fail("leaves a timer wait without cancelling it")
			}
			if st == rsAwaiting && next != rsAwaiting && ev != evConfirmTimeout && tr.do&aCancelConfirm == 0 {
				fail("leaves the wait for evidence without cancelling its cap")
			}
			if next == rsAwaiting && tr.do&(aAwait|aAwaitCap) == 0 && tr != ignore {
				fail("waits for evidence without saying until when")
			}
			if next == rsAwaiting && ev == evLost && tr.do&aAwait == 0 {
				fail("no deadline for evidence while the connection is down")
			}
			if next == rsAwaiting && ev == evReconnected && tr.do&aAwaitCap == 0 {
				fail("evidence awaited after a reconnect, until the cap")
			}
			if tr.do&(aAwait|aAwaitCap) != 0 && next != rsAwaiting {
				fail("an evidence wait outside awaiting")
			}
			// Confirmation.
			if next == rsSubscribed && st != rsSubscribed && tr.do&(aAck|aAckEvidence|aCancelRetry) == 0 {
				fail("subscribed without a confirmation")
			}
			if tr.do&aAck != 0 && ev != evSucceeded {
				fail("acknowledged without a successful attempt")
			}
			if tr.do&aAckEvidence != 0 && ev != evConfirmed {
				fail("confirmed without evidence")
			}
			if ev == evConfirmed && (st == rsAwaiting || st == rsRefresh || st == rsRefreshQueued) && next != rsSubscribed {
				fail("evidence answers a wait for it, and a Refresh not sent")
			}
			// A disruption of a confirmed subscription is answered.
			if disruptions[ev] && st == rsSubscribed && next == rsSubscribed {
				fail("a disruption of a subscribed subscription is ignored")
			}
			if disruptions[ev] && (st == rsSubscribed || st == rsRefresh || st == rsRefreshQueued || st == rsRefreshInFlight) &&
				tr.do&aRetrying == 0 {
				fail("a disrupted subscription shows retrying")
			}
			if disruptions[ev] && st == rsInFlight && ev != evLost && next != rsInFlightAgain {
				fail("a disruption during an attempt asks for another after it")
			}
			if ev == evReconnected && st.inFlight() && tr.do&aCancelAttempt == 0 {
				fail("a reconnect cancels the attempt on the old connection")
			}
			if ev == evRefresh && st != rsSubscribed && tr != ignore {
				fail("only a subscribed subscription refreshes")
			}
		})
	}
	// The confirming table differs in the subscribed subscription's
	// answer to the connection's reports only.
	cells(func(st runState, ev runEvent) {
		if runTable[st][ev] != confirmingTable[st][ev] && (st != rsSubscribed || (ev != evLost && ev != evReconnected)) {
			t.Errorf("%v × %v: the tables differ", st, ev)
		}
	})
	// Every state is reachable from new.
	seen := map[runState]bool{rsNew: true}
	for queue := []runState{rsNew}; len(queue) > 0; queue = queue[1:] {
		for _, tab := range []*[numRunStates][numRunEvents]transition{&runTable, &confirmingTable} {
			for ev := range numRunEvents {
				if n := resolved(queue[0], tab[queue[0]][ev]); !seen[n] {
					seen[n] = true
					queue = append(queue, n)
				}
			}
		}
	}
	for st := runState(1); st < numRunStates; st++ {
		if !seen[st] {
			t.Errorf("%v: unreachable", st)
		}
	}
}
