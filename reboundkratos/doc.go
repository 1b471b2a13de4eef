// Package reboundkratos puts rebound behind kratos' service registry
// interfaces (github.com/go-kratos/kratos/v2/registry): a Discovery for
// kratos' gRPC and HTTP clients and a Registrar for kratos.App, both
// wire-compatible with kratos' contrib Nacos and etcd registries, so a
// fleet can move from the contrib registry to rebound one process at a
// time.
//
// # Consumers
//
// A Discovery reads a subscriber.Manager: the Manager keeps each
// subscription alive through registry outages and restarts (jittered,
// limiter-paced retries, confirmation after reconnects, last-known-good
// lists and the empty-list hold), and the Discovery hands its lists to
// kratos:
//
//	reg, _ := nacos.New(namingClient)              // or etcd.New(client, etcd.WithLayout(reboundkratos.EtcdLayout{}))
//	m, _ := subscriber.New(reg)
//	d, _ := reboundkratos.NewDiscovery(m, reboundkratos.FormatNacos) // or FormatEtcd
//	conn, _ := grpc.DialInsecure(ctx,                // kratos' transport/grpc
//		grpc.WithEndpoint("discovery:///helloworld.grpc"), // etcd: discovery:///helloworld
//		grpc.WithDiscovery(d))
//
// Watch returns at once, whatever the registry's state: kratos' resolver,
// which fails the dial when Watch has not returned within 10 s (and the
// contrib Nacos registry's Watch fails at once when Nacos is down), dials
// without error and its RPCs wait for the first list. Next returns the
// current list first, then newer lists, in order and never twice (a list
// that a newer one replaced while the watcher converted the one before is
// skipped; the last list always arrives); it returns an error only when
// the watcher was stopped (ErrWatcherStopped, which matches
// context.Canceled so kratos' loop ends) or its ctx ended, so kratos'
// fixed one-second retry loop never runs. Every watcher of a name reads
// the Manager's one shared view of its key (subscriber.View), shared with
// every other reader of the key; Stop releases only its own share. GetService answers from memory.
//
// # Providers
//
// A Registrar registers a kratos.App's instance through an adapter's
// provider-side registrations (subscriber.Registration: etcd.Register,
// nacos.Register), which keep it registered through registry restarts,
// expired leases and rejected re-registrations until Deregister:
//
//	r, _ := reboundkratos.NewRegistrar(reboundkratos.FormatEtcd,
//		func(ctx context.Context, key subscriber.Key, inst subscriber.Instance) (subscriber.Registration, error) {
//			return etcd.Register(ctx, client, key, inst, etcd.WithLayout(reboundkratos.EtcdLayout{}))
//		})
//	app := kratos.New(kratos.Name("helloworld"), kratos.Server(srv), kratos.Registrar(r))
//
// Deregister drains: it deregisters, waits WithDrainDelay (default
// 2 s) so that consumers see the instance leave, and only
// then returns, when kratos.App.Stop stops the servers.
//
// # Formats
//
// FormatNacos (contrib/registry/nacos): one Nacos instance per endpoint,
// in service "<name>.<scheme>", metadata "kind" and "version" added,
// group DEFAULT_GROUP and cluster DEFAULT unless WithGroup and
// WithCluster say otherwise, weight 100, ephemeral. FormatEtcd
// (contrib/registry/etcd, with EtcdLayout): key "/microservices/<name>/<id>"
// holding the JSON of the ServiceInstance, on a lease. See docs/kratos.md
// for the formats byte by byte and for what changes for a user of the
// contrib registries.
//
// Discovery and Registrar are safe for concurrent use.
package reboundkratos
