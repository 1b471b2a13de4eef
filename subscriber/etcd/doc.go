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
// New and Register take Options. WithLayout and WithLogger configure
// both; the others configure Register, and New refuses them. A nil option is ignored; a bad value is a
// *rebound.ArgumentError from the constructor naming the option and the
// rule.
//
// # Key layout
//
// Every instance is one key:
//
//	<prefix>/<namespace>/<group>/<service>/<instance-id>  ->  JSON instance
//
// prefix is "/rebound/services"; an empty
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
// Key.Clusters filters instances by their "cluster" on the subscriber side.
//
// # Other layouts, subscribing, errors, registering, leases
//
// WithLayout(EndpointsLayout(nil)) reads and writes the layout of etcd's
// own client/v3/naming/endpoints; any other layout is a type with the
// three methods of Layout. Subscribe is a linearizable Get then a Watch;
// a failed watch is handed back to the Manager (Sink.Resubscribe). Errors
// read "etcd: op key: cause" and wrap the cause: closed, an invalid key and permission
// errors are permanent, the rest transient. Register keeps the key on a
// lease the client keeps alive, and repairs it through a rebound.Schedule
// (WithPolicy). docs/etcd.md says how each works and why; ClientConfig's
// settings and the TTL rule are there too.
//
// Registry and Registrations are safe for concurrent use; Close of each
// waits for its goroutines. Package etcdtest runs real etcd members in
// the test process.
package etcd
