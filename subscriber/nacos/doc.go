// Package nacos adapts the Nacos naming client of
// github.com/nacos-group/nacos-sdk-go/v2 (v2.3.2) to subscriber.Registry,
// so that a subscriber.Manager keeps its Nacos subscriptions alive:
//
//	client, _ := clients.NewNamingClient(vo.NacosClientParam{...})
//	reg, _ := nacos.New(client, nacos.WithLogger(log))
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
//     *vo.SubscribeParam per subscription for its whole life and never
//     calls Subscribe twice for it without an Unsubscribe in between
//     (which removes exactly that pointer).
//   - A real request when one is needed. While the SDK believes a service
//     is subscribed (redo entry and cached list present), its Subscribe
//     sends nothing to the server, even if the server forgot the
//     subscription and the SDK's own redo failed. When the Manager asks
//     again for such a subscription, the adapter unsubscribes first, which
//     clears both, so the Subscribe is a real SubscribeServiceRequest; when
//     the SDK holds the callback but no list, a GetService sends the
//     request without touching the callbacks.
//   - Shared keys. Unsubscribe in the SDK unsubscribes the whole client
//     from the service on the server. When one of several subscriptions of
//     the same key stops, the adapter asks the others to resubscribe
//     (Sink.Resubscribe). The adapter serializes its SDK calls per key.
//   - Older lists. The SDK stores a reply or a push without a lock, so a
//     reply taken before a newer push (its start-up redo's, a re-query's)
//     can be stored after it and run the callbacks with the older list.
//     The callback reads the cache (unless an SDK call of the adapter for
//     the key is in flight) and passes on the list it holds (the
//     callback's or one stored after it) unless its LastRefTime is not
//     newer than the one passed on last. The SDK's
//     cache may keep the older list until the next change, and a change
//     back to that list is then not reported (subscriber.WithReconcile
//     repairs it).
//   - Closed client. The SDK reports a closed client as "client not
//     connected, current status:SHUTDOWN"; the adapter maps that (and its
//     own Close) to an error matching rebound.ErrClosed, which stops the
//     subscriptions for good. Every other error is transient.
//   - Reconnects. The connection events of the SDK's RPC client are not
//     reachable from outside it, so the adapter's MonitorConnection polls
//     ServerHealthy: every 100 ms while connected (an atomic load in the
//     SDK) and every second while not (the SDK then makes HTTP requests);
//     in between, new server data in the SDK's cache also tells that the
//     client is back. A reconnect is reported (true) at once.
//     While MonitorConnection runs, Subscribe reads its view of the
//     connection instead of calling ServerHealthy.
//   - No calls while disconnected. A request made while the client is
//     disconnected fails only after the SDK's timeout, and one that fails
//     just as the client reconnects makes the SDK mark the new connection
//     unhealthy and redo everything again. Subscribe therefore returns a
//     transient "client not connected" error without
//     calling the SDK while the client is down, except for one probe every
//     10 s that learns whether the client was closed.
//   - Confirmation from evidence, not by re-sending (the Registry's
//     ConfirmsReconnects is true). On every reconnect the SDK re-sends
//     its cached subscriptions once (its "redo"); a failed one is only
//     logged. Nacos 2.x stamps every subscribe reply and every push with a
//     new lastRefTime, and the SDK stores it in its cache even when the
//     list did not change; a rejected request (TPS control, auth) carries
//     none. So after a reconnect the adapter reads each key's cached
//     LastRefTime (GetService on a cached key: no server call) and calls
//     Sink.Confirmed for the subscriptions whose key has data newer than
//     when the disconnection was seen: where the redo worked, nothing more
//     is sent. The subscriptions still without evidence once none has
//     arrived for any key for the evidence window (2 s, at most 10 s after the reconnect) are handed back with
//     Sink.Resubscribe: the Manager subscribes each of them
//     again through its jittered, limiter-paced loop. There is no settle
//     time: the adapter never sends anything for a subscription the redo
//     confirmed, and hands one back only after the redo has gone quiet.
//   - Rejections reported as success. nacos-sdk-go v2.3.2 returns nil from
//     Subscribe when the server rejected the request in the handler's own
//     response type (Nacos' TPS control answers "Tps Flow restricted" with
//     a SubscribeServiceResponse, errorCode 503). Subscribe checks that the
//     server answered with data (its callback ran with a new list, or the
//     SDK's cache holds the key; else one GetService, which on a cache miss
//     is itself a subscribe request) and returns a transient
//     error wrapping ErrRejected otherwise, so the Manager
//     tries again.
//   - Empty lists. With the SDK's default UpdateCacheWhenEmpty=false, an
//     empty instance list is never stored nor delivered (the callback does
//     not run; the SDK only logs "instance list is empty"): a subscription
//     keeps its last non-empty list when every provider goes away, and a
//     key that is empty has no cached data, so its confirmation costs one
//     subscribe request. Set UpdateCacheWhenEmpty true to see empty lists.
//
// What remains out of reach (a server that forgets a subscription
// without a connection change, a lost push): docs/subscription.md. Pair
// the Manager with periodic reconciliation (Registry.Lookup) for those.
//
// # Providers: Register
//
// Register keeps a provider's ephemeral instance registered (a
// subscriber.Registration, the same shape as etcd.Register's): it makes
// the first registration itself and returns its error (a rejection that
// the SDK reports as success is ErrRejected), then, after every
// reconnect, asks the server (on a query connection of its own per
// client, not the SDK's cache) whether the SDK's redo registered the
// instance again, and registers it again only if it is missing, through
// a rebound.Schedule. The same check runs every 30 s (±25%), which
// finds an instance the server lost without closing the connection.
// Shutdown deregisters and returns once the server no longer lists the
// instance (or lists it only as another client's); the deregister
// request also removes the SDK's redo entry, so no later reconnect
// brings it back. A second Register of one service
// from one client is an *rebound.ArgumentError (Nacos 2.x keeps one
// instance per service per connection and would replace the first).
//
// Keys map to the SDK as follows: an empty Group is "DEFAULT_GROUP";
// Clusters are sorted, de-duplicated and joined with ","; Namespace must be
// empty or the client's namespace (a naming client serves one namespace).
// Lists passed to the Manager are converted to subscriber.Instance with
// their Metadata copied.
package nacos
