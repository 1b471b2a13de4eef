// Package statusz serves a status page for rebound: an http.Handler a
// service mounts (for example at /debug/rebound), in the spirit of grpc's
// channelz and x/net/trace, with a small HTML page for people and JSON for
// machines.
//
// It shows every subscription of each subscriber.Manager given with
// WithSubscriptions (key, state, how long in it, attempts, last error,
// instances, deliveries, last delivery, last confirmation), the registry
// connection when the source reports it (CountsSource), and each
// failback.Invoker given with WithFailback (queue, in flight, totals), and,
// beside the subscriptions, a provider's registrations given with
// WithRegistrations (statusz.Registrations{reg1, reg2}: registry, key,
// instance, state, registrations, repairs, attempts, last error; those not
// registered first).
//
// WithBreakers lists the circuit breakers that are not closed of a
// *cluster.BreakerDirectory (any BreakerSource): target, state (open or
// half-open), since when and for how long, when an open one next lets a
// probe through, and whether its target is ejected (out of selection) or,
// beyond the directory's ejection share (cluster.WithMaxEjected), "over
// the share, still called"; the longest open first. Give it the name of
// the WithFailback section whose invoker calls through the directory and
// the breakers are listed there, beside the invoker's Stats.BreakerWaits
// (retries that waited for a breaker instead of being attempted); under
// another name they get a section of their own. In JSON they are
// FailbackPage.Breakers (absent without a source, [] with none open) and
// Page.Breakers. Targets are registry data: the page escapes them (as
// everything it shows) and passes them through logging.Scrub.
//
// The page is also an observer of the events metrics and logs see: an
// EventLog (NewEventLog) is a rebound.Observer to give to the WithObserver
// option of a Manager, a failback invoker, a registry adapter's
// registrations or a breaker directory; WithEvents shows what it kept
// (the most recent events, newest first: kind, what about, what happened,
// the error scrubbed).
//
// Every state of subscriber.States is counted, filtered on and shown,
// including a held empty list (subscriber.StateHeld: since, until and
// why). Stuck subscriptions come first: retrying, held, pending, stopped,
// each the longest in its state first; then subscribed ones by key.
//
// The HTML page has no JavaScript. It stays readable at 10,000
// subscriptions: counts per state at the top (links that filter), a state
// filter and a key search, and DefaultPageSize rows per page
// (WithPageSize). Its links are query-only references to the page itself
// ("?state=retrying&limit=10"), never built from the request's path, so
// they work, and stay on the site, wherever the handler is mounted (also
// under http.StripPrefix); they keep the query's parameters. JSON (?format=json, or an Accept header preferring
// application/json) lists every matching subscription unless limit is
// given. The handler reads its sources on each request and keeps no state;
// rendering 10,000 subscriptions takes a few milliseconds of server time
// (BenchmarkRender10000).
//
//	h, err := statusz.New(
//		statusz.WithSubscriptions("nacos", manager),
//		statusz.WithRegistrations("providers", statusz.Registrations{reg}),
//		statusz.WithFailback("notify", invoker),
//		statusz.WithBreakers("notify", breakers), // the invoker's *cluster.BreakerDirectory
//		statusz.WithEvents("events", events),     // events, _ := statusz.NewEventLog(0), given to WithObserver options
//	)
//	if err != nil { ... }
//	mux.Handle("/debug/rebound", h)
//
// Mount it where only operators can reach it: it shows service names,
// instance counts and error texts (error texts pass through logging.Scrub,
// which removes the credentials it recognises).
package statusz
