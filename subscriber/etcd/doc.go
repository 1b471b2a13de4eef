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
//	defer g.Shutdown(context.Background()) // deregisters (revokes the lease)
//
// Close the Manager, then the Registry, then the client.
//
// New and Register take Options. WithPrefix, WithLayout, WithLogger and
// WithAttemptTimeout configure both; the others configure Register, and
// New refuses them. A nil option is ignored; a bad value is a
// *rebound.ArgumentError from the constructor naming the option and the
// rule.
//
// # Key layout
//
// Every instance is one key:
//
//	<prefix>/<namespace>/<group>/<service>/<instance-id>  ->  JSON instance
//
// prefix defaults to "/rebound/services" (WithPrefix); an empty
// Key.Namespace is "public" and an empty Key.Group "DEFAULT_GROUP", as in
// Nacos. Segments must not contain "/". The instance ID is the last
// segment: Instance.ID, or "ip:port" when it is empty. The value is a JSON
// object:
//
//	{"id":"10.0.1.7:8080","ip":"10.0.1.7","port":8080,"weight":1,
//	 "healthy":true,"enabled":true,"ephemeral":true,"cluster":"DEFAULT",
//	 "metadata":{"zone":"a"}}
//
// "ip" is required; a missing or empty "cluster" means "DEFAULT"; "id" is
// informational (the key decides). Keys below an instance key, and values
// that do not decode, are skipped (the latter logged at Warn).
// Registration.InstanceKey returns an instance's key. Key.Clusters filters
// instances by their "cluster" on the subscriber side.
//
// # Other layouts
//
// WithLayout(EndpointsLayout{}) reads and writes the layout of etcd's own
// client/v3/naming/endpoints ("<target>/<key>" with the JSON value
// {"Op":0,"Addr":"host:port","Metadata":...}; the target is Key.Service):
// a service whose providers register with endpoints.Manager (or whose
// clients use etcd's naming/resolver) can switch its clients to rebound
// without touching its providers, and a Registration in that layout is an
// ordinary endpoint for them.
//
// Reading: the instance's ID is the key after "<target>/" (deeper keys
// included, as etcd's resolver does); Addr "host:port" gives IP and Port
// (an Addr without a port gives IP = Addr and Port 0); the instance is
// Healthy and Enabled with Weight 1 and Cluster "DEFAULT"; Metadata:
// a JSON object's string values as they are and other values as their
// JSON text; any other non-null Metadata is kept as its JSON text under
// the key "metadata". A value with an empty Addr or Op other than 0 is
// skipped.
//
// Writing (Register): "<target>/" + the instance ID (inst.ID, or
// ip:port), with Op 0 (endpoints' Add), Addr ip:port and the instance's
// Metadata as a JSON object, on the lease; etcd's resolver then sees it
// like any endpoint.
//
// Any other layout is a type with the three methods of Layout. For
// example, kratos' etcd registry stores each instance at
// "/microservices/<name>/<id>" as its JSON ServiceInstance
// ({"id","name","version","metadata","endpoints":["grpc://host:port"]}):
// ServicePrefix returns "/microservices/" + key.Service + "/", Decode
// unmarshals that struct and takes IP and port from the first endpoint URL
// (url.Parse, then net.SplitHostPort of its Host), Encode does the
// reverse. go-zero stores "<key>/<lease id>" with the bare "host:port" as
// the value: ServicePrefix returns key.Service + "/", Decode splits the
// value with net.SplitHostPort (the ID is the lease part of the key),
// and Encode cannot choose the ID (go-zero uses the lease), so such a
// layout is for reading only and its Encode returns an error.
//
// # Subscribing
//
// Registry.Subscribe is one attempt, bounded by its ctx, the attempt
// timeout and Close whatever etcd does (it returns within moments of the
// first of them ending, even with a server that never answers the watch
// creation, and a watch created as the attempt ends is cancelled, not
// used): a linearizable Get of the service's prefix, then a Watch from
// the Get's revision + 1, created before the attempt returns; the Get's list is delivered to the sink, then the full
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
// Right after reporting Disconnected, MonitorConnection stops every watch
// without calling its sink: the client would otherwise resume them all
// at once when the connection is back, only for the confirmations to
// replace them. No subscription is lost that way: it reports Connected
// before it could see the connection usable again, and by the contract
// of ConnectionMonitor the caller then confirms every subscription,
// including one whose attempt was in flight during the drop.
//
// While the connection is not usable, attempts fail at once with an
// error wrapping subscriber.ErrDisconnected instead of queueing requests (etcd's client waits for
// a connection by default) that every waiting subscription would send the
// moment the cluster comes back.
//
// Registry also implements subscriber.Reconciler: Lookup is one
// linearizable Get of the service's prefix, nothing cached and no watch
// started, for the Manager's periodic reconciliation.
//
// # Errors
//
// Failed operations return a *subscriber.OpError (Registry "etcd", the
// operation, the key, the cause), the shape the Nacos adapter returns
// too:
//
//   - a closed Registry or client: the cause wraps
//     subscriber.ErrRegistryClosed (which matches rebound.ErrClosed), which
//     stops a subscription for good;
//   - an invalid key: a *rebound.ArgumentError, marked rebound.Permanent;
//   - codes.PermissionDenied and codes.InvalidArgument from the server
//     (permission denied, authentication failed): marked
//     rebound.Permanent, as retrying cannot fix them;
//   - everything else is transient: no connection (the cause wraps
//     subscriber.ErrDisconnected, as in the Nacos adapter),
//     codes.Unavailable (rpctypes.ErrNoLeader, ErrLeaderChanged,
//     ErrStopped, ErrTimeout and the other "request timed out" errors,
//     connection refused), codes.DeadlineExceeded and the attempt's own
//     timeout (WithAttemptTimeout, default 5 s), rpctypes.ErrCompacted,
//     codes.ResourceExhausted, and anything unclassified.
//
// The Nacos adapter (subscriber/nacos) maps the same way: closed is
// permanent, invalid keys are permanent, the rest is transient; it has no
// authorization errors to map.
//
// # Registering
//
// Register puts an instance on a lease (WithTTL, default 30 s)
// that the client keeps alive, and one goroutine keeps it registered
// until Shutdown or Close: a keep-alive channel the client closes (no
// answer for a TTL) is followed by TimeToLive, and a lease that still
// lives is kept alive again (a quorum loss, however long, does not cost
// the key: no lease expires without a leader, and a new leader extends
// every lease); only a lease that is gone is replaced. The Registration
// watches its own key and puts it back when it is deleted or put without
// a lease; it leaves a key that another live lease took over (another
// Registration of the same instance), and takes it back when that lease
// lets it go, so that of two Registrations of one instance, closing one
// never removes the other's for good. Its retries run on a
// rebound.Schedule (WithPolicy), cut short when the connection comes
// back. A lease survives a restart of the cluster.
//
// Stopping follows net/http.Server: Registration.Shutdown(ctx) stops and
// deregisters (revokes the lease, retried until ctx is done);
// Registration.Close
// stops at once without a request, leaving the key to expire with its
// lease.
//
// # Leases and keep-alive
//
// A lease must outlive the time the client needs to notice a dead
// connection and move to another member, or a partition of one member (a
// blackholed member: the connection stays open, nothing arrives) lets the
// lease expire while the rest of the cluster is healthy. gRPC notices
// such a connection DialKeepAliveTime after it last received anything,
// plus DialKeepAliveTimeout; the lease was renewed at most a third of the
// TTL before that (clientv3 sends keep-alives every TTL/3, and other
// traffic on the same connection can postpone the ping). The rule:
//
//	TTL >= 1.5 x (DialKeepAliveTime + DialKeepAliveTimeout + 2 s)
//
// where 2 s covers reconnecting to another member and one keep-alive
// round trip. ClientConfig uses 10 s (gRPC's minimum) and 3 s: 22.5 s,
// so the default TTL is 30 s. The previous defaults (a 10 s TTL with 10 s + 5 s
// detection) broke it: a blackholed member let the lease expire
// (TestBlackholedMemberKeepsLease measures both). A client without
// keep-alive pings (DialKeepAliveTime 0, clientv3's default) never
// notices such a member at all: use ClientConfig, or set both.
//
// # Clients
//
// ClientConfig returns a client configuration suited to the adapter (a
// quiet logger, no hidden retry loop, a capped reconnect backoff,
// keep-alive pings). With another configuration, note that clientv3's
// default MaxUnaryRetries (100, 25 ms apart) runs inside each attempt:
// it would hide an outage inside one attempt and send 40 requests a
// second per subscription to a member without a leader. Its gRPC
// reconnect backoff is capped at 750 ms (at most 0.9 s with gRPC's 20%
// jitter; gRPC's default cap, 120 s, can keep a client away from a
// recovered cluster for two minutes); the cost is a refused TCP connect
// about once a second to a member that is down. DialTimeout stays 0:
// clientv3.New does not block, and the Manager retries a cluster that is
// down at start.
//
// # Concurrency and goroutines
//
// Registry and Registration are safe for concurrent use. A Registry runs
// one goroutine per subscription with a watch, stopped by Unsubscribe,
// the next Subscribe of the same sink, the end of its watch, or Close.
// Unsubscribe makes no request and returns once the watch's goroutine
// ended; Close (io.Closer) cancels every watch and every attempt in
// flight and waits for all of them. A Manager over this Registry
// therefore closes promptly with every etcd member down
// (TestManagerCloseBoundedWithEveryMemberDown). A Registration runs two
// goroutines (its loop and a watcher of the connection state) from
// Register to Shutdown or Close. No sink method is called while a lock of
// this package is held.
//
// Package etcdtest runs real etcd members in the test process, for tests
// of code built on this package.
package etcd
