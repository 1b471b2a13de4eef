// Package reboundgrpc connects grpc-go to rebound: a resolver.Builder over
// a subscriber.Manager (so every registry adapter — Nacos, etcd — feeds
// grpc-go's balancers), and a cluster.Invoker over a grpc.ClientConn with a
// gRPC status classifier, so that failback can retry fire-and-forget RPCs.
//
// # Resolver
//
//	m, _ := subscriber.New(registry)         // subscriber/nacos, subscriber/etcd, ...
//	b, _ := reboundgrpc.NewBuilder(m)
//	defer b.Close()                          // after the ClientConns, before m.Close
//	cc, _ := grpc.NewClient("rebound:///orders?group=shop&clusters=a,b",
//		grpc.WithResolvers(b),
//		grpc.WithTransportCredentials(insecure.NewCredentials()))
//
// Targets: <scheme>://[namespace]/<service>[?group=G][&clusters=a,b]; see
// ParseTarget. The resolver follows grpc-go's conventions (resolver/manual,
// the dns resolver):
//
//   - Build never blocks on the registry and never fails because it is
//     down. The ClientConn gets addresses as soon as the subscription
//     delivers its first list; RPCs made meanwhile wait for it (they block
//     in grpc-go until the first resolver state or their deadline). If the
//     registry answers with errors, the ClientConn hears them through
//     ReportError from WithUnresolvedReport (1 s) after Build on, each new
//     error as the Manager's view pushes it (no polling), so fail-fast RPCs
//     fail with Unavailable while grpc.WaitForReady(true) RPCs keep waiting.
//   - Each resolver is a thin reader of its key's shared view
//     (subscriber.View, in the Builder's subscriber.WatchGroup): one Manager
//     subscription per Key value (Namespace, Group, Service and the set of
//     Clusters; never Key.String, which two different keys can share:
//     service "a/b/c" and namespace "a", group "b", service "c"), shared
//     and reference-counted by the Manager for every ClientConn, every
//     resolver a ClientConn builds again when it leaves idle mode
//     (grpc.WithIdleTimeout closes the resolver on entering idle mode) and
//     every other reader of the key. A subscription outlives the Builder's
//     last resolver by WithLinger (30 s): a resolver built within it gets
//     the last list at once, with no registry request. 1,000 ClientConns to
//     one target make one registry subscription.
//   - Lists come from the Manager, so its rules apply: last-known-good
//     while the registry is unreachable, empty lists held back during
//     reconnect churn (subscriber.WithEmptyListHold). A confirmed empty list
//     (or one whose instances are all filtered out) is sent as an empty
//     state, which closes the balancer's connections, followed by
//     ReportError(ErrNoInstances ...), so fail-fast RPCs fail at once with
//     Unavailable. grpc-go answers an empty state with
//     balancer.ErrBadResolverState by design; that is not retried. For a
//     list the filter emptied, the error says why ("3 instances, all
//     disabled") and the Builder logs it at Warn; pick_first puts it in the
//     RPC's error, round_robin says "no children to pick from" whatever the
//     resolver reports.
//   - A non-empty state the ClientConn rejects (UpdateState returns an
//     error) is sent again with backoff, timed by a rebound.Schedule per
//     resolver (WithPolicy, the zero rebound.Policy by default; WithObserver
//     observes it), and at once when a newer list arrives.
//   - ResolveNow (which balancers call when connections fail) is coalesced
//     by the view across all ClientConns of a subscription (View.Refresh):
//     at most one re-confirmation per WithResolveNowInterval (6 s), and none
//     while the Manager is confirming the subscription anyway. A held
//     subscription (an empty list held back after a reconnect, StateHeld)
//     is refreshed too, so the registry is asked at once whether the
//     providers are back. See Stats.Refreshes. After a stop for good of
//     the subscription (a permanent registry error), ResolveNow subscribes
//     again instead, as a new Build does, at most once per
//     WithResolveNowInterval for each ClientConn.
//   - Instances that are not Healthy and Enabled are left out
//     (WithFilter). Each endpoint carries its registry instance
//     (InstanceFromEndpoint: ID, cluster, weight, metadata) and its
//     weight for grpc-go's weight-aware balancers
//     (experimental/balancer/weight; see WeightScale). grpc-go's
//     weighted_round_robin balancer takes its weights from ORCA load
//     reports, not from the resolver.
//   - The filter runs once per list on each ClientConn's resolver
//     goroutine, outside any lock: a slow filter delays only the
//     ClientConns it runs for, and it may call Stats. A panic of the filter or of
//     a WithObserver observer is recovered (Stats.Panics, logged at Error with its
//     stack): the ClientConns keep the last list the filter accepted (one
//     with none hears the *cluster.PanicError through ReportError), and
//     later lists are filtered and delivered as usual.
//   - Target(scheme, key) is ParseTarget's inverse: a namespace that is not
//     made of letters, digits, '-', '.', '_' and '~' goes into the
//     namespace parameter, and everything is escaped.
//
// Metrics: WithMeterProvider (rebound.grpc.* instruments, read from
// Stats). Observers of the loops that re-send rejected states: WithObserver.
//
// Goroutines: a resolver runs one goroutine, waiting on its view's change
// signal; Close on the resolver (grpc-go calls it) and on the Builder
// waits for it. The shared subscriptions' goroutines are the Manager's.
//
// # Failback for gRPC calls
//
// Invoker turns a ClientConn into a cluster.Invoker; Classify marks gRPC
// errors as transient (Unavailable, Aborted, DeadlineExceeded of the
// attempt, ResourceExhausted with a grpc-retry-pushback-ms trailer) or
// permanent (InvalidArgument, NotFound, PermissionDenied, Unauthenticated,
// Unimplemented, ...), which is what failback's default classifier reads:
//
//	fb, _ := failback.New(cluster.NewStaticDirectory(reboundgrpc.NewInvoker(cc)))
//	_, err := fb.Invoke(ctx, &cluster.Invocation{Method: "/audit.Audit/Record", Args: []any{req}})
//
// The balancer picks the backend of every attempt, retries included.
//
// Server pushback (gRFC A6) is honoured on every retryable code: a
// grpc-retry-pushback-ms trailer becomes a rebound.RetryAfter, which a
// retry loop caps at its Policy.MaxRetryAfter (5 min by default), so a
// pushback of more than a day waits the cap; a negative, malformed or
// repeated one means "do not retry" and makes the error permanent.
//
// A call that fails with Canceled because the ClientConn is closed
// (grpc.ErrClientConnClosing, or the ClientConn's state is Shutdown) is
// transient: closing the ClientConn before the failback Invoker leaves the
// queued calls queued (retried on the closed ClientConn, each failing the
// same way) instead of giving them up; with a failback Store they stay in
// it when the failback Invoker is closed, and the next process delivers
// them. Close the failback Invoker first when no store is used.
//
// FireAndForget is a unary client interceptor that sends the calls of
// chosen methods through such a failback invoker, so generated client code
// gets failback unchanged. Its first attempt continues the interceptor
// chain it was called from when the Invoker is over the same
// *grpc.ClientConn (interceptors placed before it run once per call, and
// the caller's call options apply); background retries, made
// after the caller's chain has returned, are calls of their own through
// the ClientConn's whole chain, with the Invoker's call options.
//
// # Calls kept across a restart
//
// With failback.WithStore, the arguments of a queued call are encoded by
// the failback Codec and decoded by the next process. A request queued by
// FireAndForget is kept as its protobuf wire form with its full type name,
// which every Codec stores (failback's default JSONCodec included) and the
// Invoker decodes again through protoregistry, so it is delivered after a
// restart with its content. A request passed to failback's Invoke as a
// message needs a Codec that gives protobuf messages back: use
// failback.WithCodec(protocodec.New(nil)): the JSONCodec refuses to store
// one (Invoke reports the call as not queued, an error matching
// failback.ErrStore naming protocodec), since it would come back as a map after a restart.
// A map that reaches the Invoker all the same (a custom Codec) is refused
// with a permanent *rebound.ArgumentError naming the fix, never sent.
package reboundgrpc
