package subscriber

// Unexported constants the external tests bound their waits with.
const (
	MaxTimerSlack      = maxTimerSlack
	MinReconcilePeriod = minReconcilePeriod
)
