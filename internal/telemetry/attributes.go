package telemetry

// Attribute keys of rebound's instruments.
const (
	AttrOutcome   = "outcome"
	AttrComponent = "component"
	AttrState     = "state"
	AttrResult    = "result"
	AttrReason    = "reason"
)

// Attribute values. Every attribute of a rebound instrument takes its
// values from one of these small, fixed sets (OpenTelemetry's rule for
// metric attributes: bounded cardinality); free text (an error, an
// adapter's words for its evidence) goes to logs, Status and hooks, never
// to an attribute. The one exception is component: rebound's own loops
// set one of the Component values, and a user who passes attributes to
// rebound.WithMeterProvider chooses their own.
const (
	// rebound.retry.attempts outcome
	OutcomeSuccessValue   = "success"
	OutcomeRetryValue     = "retry"
	OutcomeGaveUpValue    = "gave_up"
	OutcomeThrottledValue = "throttled"

	// rebound.subscriber.subscriptions state
	StatePending    = "pending"
	StateSubscribed = "subscribed"
	StateRetrying   = "retrying"
	StateStopped    = "stopped"
	StateHeld       = "held"

	// rebound.subscriber.updates result
	ResultDelivered = "delivered"
	ResultDuplicate = "duplicate"
	ResultEmptyHeld = "empty_held"
	ResultStale     = "stale"

	// rebound.subscriber.confirmations reason
	ReasonSubscribe = "subscribe" // an acknowledged Registry.Subscribe
	ReasonEvidence  = "evidence"  // the adapter's Sink.Confirmed

	// rebound.failback.calls outcome
	CallSucceeded = "succeeded"
	CallGaveUp    = "gave_up"
	CallDropped   = "dropped"

	// rebound.grpc.resolve_now result
	ResolveRefreshed = "refreshed"
	ResolveCoalesced = "coalesced"

	// component, on rebound.retry.* and rebound.limiter.wait
	ComponentSubscriber  = "subscriber"
	ComponentFailback    = "failback"
	ComponentReboundGRPC = "reboundgrpc"
)

// Components lists the component values rebound's own loops set.
var Components = []string{ComponentSubscriber, ComponentFailback, ComponentReboundGRPC}

// Values returns, per instrument name, the attribute keys it carries and
// every value each may take (component: the values of rebound's own
// loops). An instrument with no attributes maps to an empty map. Tests
// check the recorded data points against it; the package documentation's
// table says the same.
func Values() map[string]map[string][]string {
	comp := Components
	return map[string]map[string][]string{
		RetryAttempts:           {AttrOutcome: outcomeNames[:], AttrComponent: comp},
		RetryDelay:              {AttrComponent: comp},
		LimiterWait:             {AttrComponent: comp},
		SubscriberSubscriptions: {AttrState: stateNames[:]},
		SubscriberUpdates:       {AttrResult: updateNames[:]},
		SubscriberConfirmations: {AttrReason: confirmNames[:]},
		SubscriberConnected:     {},
		FailbackQueue:           {},
		FailbackCalls:           {AttrOutcome: callNames[:]},
		GRPCSubscriptions:       {},
		GRPCResolvers:           {},
		GRPCResolveNow:          {AttrResult: {ResolveRefreshed, ResolveCoalesced}},
		GRPCRejected:            {},
		BreakerTargets:          {AttrState: BreakerStateNames[:]},
		BreakerTransitions:      {AttrState: BreakerStateNames[:]},
	}
}
