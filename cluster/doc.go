// Package cluster is what a cluster invoker, such as package failback,
// needs to reach a service with several providers. An Invoker calls one
// provider. A Directory lists the providers. A LoadBalance picks one for a
// call.
//
// NewStaticDirectory lists a fixed set. A RegistryDirectory dials a
// registry's instances into invokers. A BreakerDirectory adds a circuit
// breaker per target, like Envoy's outlier detection. Random and
// RoundRobin are load balancers. See docs/cluster.md and docs/breaker.md.
//
// Data flows one way: registry push, RegistryDirectory, List,
// LoadBalance.Select, Invoker.Invoke.
package cluster
