// Package nacos adapts the Nacos naming client of
// github.com/nacos-group/nacos-sdk-go/v2 (v2.3.2) to subscriber.Registry,
// so that a subscriber.Manager keeps its Nacos subscriptions alive:
//
//	client, _ := clients.NewNamingClient(vo.NacosClientParam{...})
//	reg, _ := nacos.NewRegistry(client, nacos.WithLogger(log))
//	m, _ := subscriber.New(reg, subscriber.WithLogger(log))
//	sub, _ := m.Subscribe(ctx, subscriber.Key{Service: "orders"}, listener)
//
// # What the adapter does about the SDK
//
//   - Exactly one callback per subscription. The SDK stores callbacks as
//     pointers to the SubscribeCallback field of the *vo.SubscribeParam
//     passed to Subscribe, and appends one on every call, even a failed one
//     (it registers the callback and the redo entry before sending). A
//     naive retry therefore multiplies notifications. The adapter keeps one
//     *vo.SubscribeParam per subscription for its whole life, and before
//     calling Subscribe again for it removes the previous registration with
//     Unsubscribe (which removes exactly that pointer).
//   - A real confirmation. While the SDK believes a service is subscribed
//     (redo entry and cached list present), its Subscribe sends nothing to
//     the server, even if the server forgot the subscription after a
//     restart and the SDK's own redo failed. The Unsubscribe that precedes
//     every repeated Subscribe clears both, so each confirmation is a real
//     SubscribeServiceRequest whose reply is delivered as the current list.
//   - Shared keys. Unsubscribe in the SDK unsubscribes the whole client
//     from the service on the server. When one of several subscriptions of
//     the same key stops, the adapter asks the others to resubscribe
//     (Sink.Resubscribe). The adapter serializes its SDK calls per key.
//   - Closed client. The SDK reports a closed client as "client not
//     connected, current status:SHUTDOWN"; the adapter maps that (and its
//     own Close) to subscriber.ErrRegistryClosed, which stops the
//     subscriptions for good. Every other error is transient.
//   - Reconnects. The connection events of the SDK's RPC client are not
//     reachable from outside it, so the adapter's MonitorConnection polls
//     ServerHealthy: every 100 ms while connected (an atomic load in the
//     SDK) and every second while not (the SDK then makes up to three HTTP
//     requests per call). A reconnect or restart is reported as Connected
//     and the Manager confirms every subscription again.
//   - No calls while disconnected. A request made while the client is
//     disconnected fails only after the SDK's timeout, and one that fails
//     just as the client reconnects makes the SDK mark the new connection
//     unhealthy and redo everything again. Subscribe therefore returns a
//     transient error wrapping ErrNotConnected without calling the SDK
//     while the client is down, except for one probe every 10 s that
//     learns whether the client was closed.
//   - No race with the SDK's redo. On every reconnect the SDK re-sends its
//     cached subscriptions from its own goroutine; a confirmation
//     (Unsubscribe then Subscribe) interleaved with that redo can leave the
//     server unsubscribed while the SDK believes otherwise. The adapter
//     reports Connected, and confirms subscriptions it already holds, only
//     after the connection has been up for a settle time (WithSettle,
//     default 1 s, plus a random share of it so that clients reconnecting
//     together do not confirm together). This closes the window in
//     practice, not in theory: a redo slower than the settle time could
//     still interleave, and the SDK offers no way to observe it.
//
// Keys map to the SDK as follows: an empty Group is "DEFAULT_GROUP";
// Clusters are sorted, de-duplicated and joined with ","; Namespace must be
// empty or the client's namespace (a naming client serves one namespace).
// Lists passed to the Manager are converted to subscriber.Instance with
// their Metadata copied.
package nacos
