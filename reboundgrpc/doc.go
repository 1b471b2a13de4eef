// Package reboundgrpc connects grpc-go to rebound: a resolver.Builder
// over a subscriber.Manager, and a cluster.Invoker over a
// grpc.ClientConn, so that failback can retry fire-and-forget RPCs.
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
// Targets: <scheme>://[namespace]/<service>[?group=G][&clusters=a,b]
// (see Target). Build never blocks on the registry. ClientConns of one key
// share one Manager subscription, which outlives the last one by 30 s.
// Lists follow the Manager's rules (last-known-good, empty lists held
// back). An empty list is sent as an empty state plus ReportError, so
// fail-fast RPCs fail with Unavailable. Each endpoint carries its instance
// (InstanceFromEndpoint) and its weight for weight-aware balancers. The
// details are in docs/grpc.md.
//
// # Failback for gRPC calls
//
// Invoker makes a ClientConn a cluster.Invoker; Classify marks its errors
// transient or permanent, as failback's default classifier reads them:
//
//	fb, _ := failback.New(cluster.NewStaticDirectory(reboundgrpc.NewInvoker(cc)))
//	_, err := fb.Invoke(ctx, &cluster.Invocation{Method: "/audit.Audit/Record", Args: []any{req}})
//
// FireAndForget sends chosen methods of generated clients through such a
// failback Invoker. With a failback Store, a request it queued survives a
// restart with any Codec; a message given to failback's Invoke needs
// protocodec.New.
package reboundgrpc
