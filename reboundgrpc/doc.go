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
//     ReportError from WithUnresolvedReport (1 s) on, so fail-fast RPCs fail
//     with Unavailable while grpc.WaitForReady(true) RPCs keep waiting.
//   - One Manager subscription per Key, shared and reference-counted by
//     every ClientConn and by every resolver a ClientConn builds again when
//     it leaves idle mode (grpc.WithIdleTimeout closes the resolver on
//     entering idle mode). A subscription outlives its last resolver by
//     WithLinger (30 s): a resolver built within it gets the last list at
//     once, with no registry request. 1,000 ClientConns to one target make
//     one registry subscription.
//   - Lists come from the Manager, so its rules apply: last-known-good
//     while the registry is unreachable, empty lists held back during
//     reconnect churn (subscriber.WithEmptyListHold). A confirmed empty list
//     (or one whose instances are all filtered out) is sent as an empty
//     state, which closes the balancer's connections, followed by
//     ReportError(ErrNoInstances ...), so fail-fast RPCs fail at once with
//     Unavailable. grpc-go answers an empty state with
//     balancer.ErrBadResolverState by design; that is not retried.
//   - A non-empty state the ClientConn rejects (UpdateState returns an
//     error) is sent again with backoff, timed by a rebound.Schedule per
//     resolver (WithPolicy, the zero rebound.Policy by default; WithHooks
//     observes it), and at once when a newer list arrives.
//   - ResolveNow (which balancers call when connections fail) is coalesced
//     across all ClientConns of a subscription: at most one re-confirmation
//     per WithResolveNowInterval (6 s), and none while the Manager is
//     confirming the subscription anyway. See Stats.Refreshes.
//   - Instances that are not Healthy and Enabled are left out
//     (WithFilter). Each endpoint carries its registry instance
//     (InstanceFromEndpoint: ID, cluster, weight, metadata) and its
//     weight for grpc-go's weight-aware balancers
//     (experimental/balancer/weight; see WeightScale). grpc-go's
//     weighted_round_robin balancer takes its weights from ORCA load
//     reports, not from the resolver.
//
// Metrics: WithMeterProvider (rebound.grpc.* instruments, read from
// Stats). Hooks on the loops that re-send rejected states: WithHooks.
//
// Goroutines: a resolver runs one goroutine only while it has a state to
// send (or to send again); each shared subscription has one watcher
// goroutine; Close on the resolver (grpc-go calls it) and on the Builder
// waits for them.
//
// # Failback for gRPC calls
//
// Invoker turns a ClientConn into a cluster.Invoker; Classify marks gRPC
// errors as transient (Unavailable, Aborted, DeadlineExceeded of the
// attempt, ResourceExhausted with a grpc-retry-pushback-ms trailer, which
// becomes a rebound.RetryAfter) or permanent (InvalidArgument, NotFound,
// PermissionDenied, Unauthenticated, Unimplemented, ...), which is what
// failback's default classifier reads:
//
//	fb, _ := failback.New(cluster.NewStaticDirectory(reboundgrpc.NewInvoker(cc)))
//	_, err := fb.Invoke(ctx, &cluster.Invocation{Method: "/audit.Audit/Record", Args: []any{req}})
//
// The balancer picks the backend of every attempt, retries included.
// FireAndForget is a unary client interceptor that sends the calls of
// chosen methods through such a failback invoker, so generated client code
// gets failback unchanged.
package reboundgrpc
