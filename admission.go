package rebound

import (
	"github.com/rebound-go/rebound/internal/admit"
)

// attemptKind is what an attempt is, for admission. Admit infers it from
// the run; a lookup is asked through internal/admit.
type attemptKind uint8

const (
	// kindFirst is the first attempt of a run: after NewSchedule, Reset
	// or a success.
	kindFirst attemptKind = iota
	// kindRetry is an attempt after a failure of the run.
	kindRetry
	// kindLookup is a read beside the run (a subscription's confirmation
	// lookup): it takes its admission but is not an attempt of the run
	// (no attempt counted, no MaxElapsed). It holds its own token, apart
	// from the run's; a refusal by the throttle leaves the run as it is.
	kindLookup

	numKinds = 3
)

// gate is a set of the admission checks an attempt passes before it is
// made (withAdmission; internal/admit documents each).
type gate = admit.Gate

const (
	gateLimiter  = admit.Limiter
	gateBudget   = admit.Budget
	gateThrottle = admit.Throttle
	gateBreaker  = admit.Breaker

	allGates = gateLimiter | gateBudget | gateThrottle | gateBreaker

	// throttleUnsent marks, in the gates passed, an attempt the throttle
	// admitted that is not yet counted as its request (not yet sent).
	throttleUnsent gate = 1 << 7
)

// defaultGates is the admission of each kind without withAdmission: a
// first attempt takes no limiter token (the limiter paces retries), a
// retry passes every gate, a lookup takes a token only.
var defaultGates = [numKinds]gate{
	kindFirst:  gateBudget | gateThrottle | gateBreaker,
	kindRetry:  allGates,
	kindLookup: gateLimiter,
}

// refusalRule is what a refusal by the budget, the throttle or the breaker
// does to the loop (withRefusal; internal/admit documents each).
type refusalRule = admit.Refusal

const (
	refuseDefault refusalRule = 0
	refuseStop                = admit.Stop
	refuseDefer               = admit.Defer
	refuseDrop                = admit.Drop
)

// refusalGate is the index of a gate that can refuse in config.refusal.
func refusalGate(g gate) int {
	switch g {
	case gateBudget:
		return 0
	case gateThrottle:
		return 1
	case gateBreaker:
		return 2
	}
	return -1
}

// defaultRefusal is each refusing gate's rule without withRefusal.
var defaultRefusal = [3]refusalRule{refuseStop, refuseDefer, refuseDefer}
