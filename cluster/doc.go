// Package cluster defines what a cluster invoker (such as package failback)
// needs to reach a service with several providers: the Invoker of one
// provider, the Directory that lists the current providers, and the
// LoadBalance that picks one of them for a call.
//
// It also provides:
//
//   - NewStaticDirectory: a fixed list of invokers, for tests and for
//     services without a registry. Its List returns its internal slice and
//     does not allocate.
//   - RegistryDirectory: a Directory fed by a registry subscription. Its
//     Update method is a subscriber.Listener: it turns instances into
//     invokers through a user-supplied DialFunc, reuses the invokers of
//     unchanged instances, closes those of instances that disappeared, and
//     keeps the last known good list when a push would leave it empty.
//   - BreakerDirectory: a Directory decorator with a circuit breaker per
//     target (gobreaker's state machine, its Settings exposed through a
//     factory per target; closed, a call costs a load and an atomic add),
//     like Envoy's outlier detection: an open breaker takes its target out
//     of List within a share of the targets (WithMaxEjected, default
//     half) for an open timeout that may grow with consecutive ejections
//     (WithMaxOpenTimeout), a half-open breaker lets one probe through, a
//     target that leaves the list drops its breaker. State changes are
//     reported to WithBreakerObserver's observers with no lock held;
//     Breakers and Open list the states for a status page.
//   - Random and RoundRobin load balancers (zero values usable, safe for
//     concurrent use). Both skip the invokers passed as exclude (compared by
//     Target) while another invoker is left.
//   - PanicError: what a recovered panic of user code (a DialFunc here; an
//     Invoker, Directory, LoadBalance or hook in package failback) becomes.
//   - ErrNoInvokers: what every Directory and LoadBalance here returns when
//     there is no provider to call; never a panic or a nil Invoker.
//
// Data flows one way: registry push -> subscriber.Manager ->
// RegistryDirectory.Update -> List -> LoadBalance.Select -> Invoker.Invoke.
package cluster
