// Package statusz serves a status page for rebound: an http.Handler with
// a small HTML page for people and JSON for machines.
//
// It shows the subscriptions of each subscriber.Manager (WithSubscriptions),
// a provider's registrations (WithRegistrations), failback invokers
// (WithFailback), circuit breakers that are not closed (WithBreakers) and
// recent events (an EventLog, WithEvents). Stuck subscriptions come first.
// The handler reads its sources on each request and keeps no state.
//
//	h, err := statusz.New(
//		statusz.WithSubscriptions("nacos", manager),
//		statusz.WithRegistrations("providers", reg),
//		statusz.WithFailback("notify", invoker),
//		statusz.WithBreakers("notify", breakers), // the invoker's *cluster.BreakerDirectory
//		statusz.WithEvents("events", events),     // events := new(statusz.EventLog)
//	)
//	if err != nil { ... }
//	mux.Handle("/debug/rebound", h)
//
// Mount it where only operators can reach it: it shows service names,
// instances and error texts (passed through logging.Scrub). The query
// parameters, the order of rows and every field of the JSON document are
// in docs/statusz.md.
package statusz
