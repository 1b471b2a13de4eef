// Package etcd adapts an etcd v3 client (go.etcd.io/etcd/client/v3) to
// subscriber.Registry, so that a subscriber.Manager keeps subscriptions to
// services registered in etcd alive, and helps providers register their
// instances there:
//
//	cli, _ := clientv3.New(etcd.ClientConfig(log, "http://10.0.0.1:2379", "http://10.0.0.2:2379"))
//	reg, _ := etcd.New(cli, etcd.WithLogger(log))
//	m, _ := subscriber.New(reg, subscriber.WithLogger(log))
//	sub, _ := m.Subscribe(ctx, subscriber.Key{Service: "orders"}, listener)
//
//	// On a provider:
//	g, _ := etcd.Register(ctx, cli, subscriber.Key{Service: "orders"}, subscriber.Instance{
//		IP: "10.0.1.7", Port: 8080, Weight: 1, Healthy: true, Enabled: true,
//	})
//	defer g.Close(context.Background()) // deregisters
//
// Close the Manager, then the Registry, then the client.
//
// # Key layout
//
// Every instance is one key:
//
//	<prefix>/<namespace>/<group>/<service>/<instance-id>  ->  JSON instance
//
// prefix defaults to DefaultPrefix ("/rebound/services", WithPrefix); an
// empty Key.Namespace is DefaultNamespace ("public") and an empty Key.Group
// DefaultGroup ("DEFAULT_GROUP"), as in Nacos. Segments must not contain
// "/". The instance ID is the last segment: Instance.ID, or "ip:port" when
// it is empty (InstanceID). The value is a JSON object:
//
//	{"id":"10.0.1.7:8080","ip":"10.0.1.7","port":8080,"weight":1,
//	 "healthy":true,"enabled":true,"ephemeral":true,"cluster":"DEFAULT",
//	 "metadata":{"zone":"a"}}
//
// "ip" is required; a missing or empty "cluster" means DefaultCluster
// ("DEFAULT"); "id" is informational (the key decides). Keys below an
// instance key, and values that do not decode, are skipped (the latter
// logged at Warn). InstanceKey, ServicePrefix, EncodeInstance and
// DecodeInstance expose the layout for other tools. Key.Clusters filters
// instances by their "cluster" on the subscriber side.
//
// # Subscribing
//
// Registry.Subscribe is one attempt: a linearizable Get of the service's
// prefix, then a Watch from the Get's revision + 1, created before the
// attempt returns; the Get's list is delivered to the sink, then the full
// list after every change (events at or below the revision already
// applied are ignored, so nothing is applied twice). Calling it again for
// the same sink replaces the watch. Requests carry
// clientv3.WithRequireLeader, so a member without a leader refuses them
// at once, and cancels the watch, rather than serving stale data.
//
// When a watch fails (its revision was compacted, the member lost its
// leader, the client's watch stream ended), the adapter calls
// Sink.Resubscribe and the Manager subscribes again through its jittered,
// limited loop; the fresh Get catches up, and the Manager drops a list
// equal to the one last delivered. The adapter never retries on its own.
//
// Registry also implements subscriber.ConnectionMonitor, from the state
// of the client's gRPC connection (usable while any member is). When the
// connection is lost, it reports Disconnected and drops its watches;
// when it is back it reports Connected, and the Manager confirms every
// subscription with a fresh Get and watch, paced by its limiter. The
// client would otherwise resume every watch at once on reconnection, from
// the revision it had seen: a burst of watch creations (about 600 in
// 100 ms for 1,000 subscriptions, measured), and wrong after a cluster
// was restored from a backup or recreated empty, whose revisions start
// again below that one (the old watches would silently wait for revisions
// that mean something else; TestRegistrationSurvivesRestartAndWipe).
// A member that stops while others serve does not count: the client's
// watches move to another member by themselves.
//
// While the connection is not usable, attempts fail at once with
// ErrNotConnected instead of queueing requests (etcd's client waits for
// a connection by default) that every waiting subscription would send the
// moment the cluster comes back.
//
// # Errors
//
// Failed operations return an *OpError naming the operation and the key
// and wrapping the cause:
//
//   - a closed Registry or client: the cause wraps
//     subscriber.ErrRegistryClosed, which stops a subscription for good;
//   - an invalid key: a *subscriber.ArgumentError, marked
//     rebound.Permanent;
//   - codes.PermissionDenied and codes.InvalidArgument from the server
//     (permission denied, authentication failed): marked
//     rebound.Permanent, as retrying cannot fix them;
//   - everything else is transient: ErrNotConnected, codes.Unavailable
//     (rpctypes.ErrNoLeader, ErrLeaderChanged, ErrStopped, ErrTimeout and
//     the other "request timed out" errors, connection refused),
//     codes.DeadlineExceeded and the attempt's own timeout
//     (WithAttemptTimeout, default 5 s), rpctypes.ErrCompacted,
//     codes.ResourceExhausted, and anything unclassified.
//
// The Nacos adapter (subscriber/nacos) maps the same way: closed is
// permanent, invalid keys are permanent, the rest is transient; it has no
// authorization errors to map.
//
// # Registering
//
// Register puts an instance on a lease (WithTTL, default 10 s) that the
// client keeps alive, and keeps it registered: whenever the lease is lost
// (it expired while the cluster was unreachable, someone revoked it, the
// cluster was recreated without it) it grants a new lease and puts the
// key again, with backoff (WithPolicy). A lease survives a restart of the
// cluster. Registration.Close deregisters (revokes the lease).
//
// # Clients
//
// ClientConfig returns a client configuration suited to the adapter (a
// quiet logger, no hidden retry loop, a capped reconnect backoff,
// keep-alive pings). With another configuration, note that clientv3's
// default MaxUnaryRetries (100, 25 ms apart) runs inside each attempt.
//
// # Concurrency and goroutines
//
// Registry and Registration are safe for concurrent use. A Registry runs
// one goroutine per subscription with a watch, stopped by Unsubscribe,
// the next Subscribe of the same sink, the end of its watch, or Close,
// which waits for all of them. A Registration runs one goroutine from
// Register to Close. No sink method is called while a lock of this
// package is held.
//
// Package etcdtest runs real etcd members in the test process, for tests
// of code built on this package.
package etcd
