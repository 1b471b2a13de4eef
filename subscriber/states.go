package subscriber

// States returns every State, in the order of their values: StatePending,
// StateSubscribed, StateRetrying, StateHeld, StateStopped. Code that shows
// or counts subscriptions per state (a status page, gauges) ranges over it
// instead of naming the states, so that a state added later is not missed.
// Each call returns a new slice, which the caller may modify.
func States() []State {
	s := make([]State, 0, numStates-1)
	for st := StatePending; int(st) < numStates; st++ {
		s = append(s, st)
	}
	return s
}
