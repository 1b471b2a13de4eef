package subscriber

// States returns every State in order, for pages and gauges that count by
// state. Each call returns a new slice.
func States() []State {
	s := make([]State, 0, numStates-1)
	for st := StatePending; int(st) < numStates; st++ {
		s = append(s, st)
	}
	return s
}
