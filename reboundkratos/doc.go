// Package reboundkratos puts rebound behind kratos' service registry
// interfaces: a Discovery for kratos' clients and a Registrar for
// kratos.App. Both read and write the layouts of kratos' contrib Nacos and
// etcd registries, so a fleet can move to rebound one process at a time.
//
// # Consumers
//
// A Discovery reads a subscriber.Manager, which keeps each subscription
// alive through registry outages; the Discovery hands its lists to kratos:
//
//	reg, _ := nacos.New(namingClient)              // or etcd.New(client, etcd.WithLayout(reboundkratos.EtcdLayout("")))
//	m, _ := subscriber.New(reg)
//	d, _ := reboundkratos.NewDiscovery(m, reboundkratos.FormatNacos) // or FormatEtcd
//	conn, _ := grpc.DialInsecure(ctx,                // kratos' transport/grpc
//		grpc.WithEndpoint("discovery:///helloworld.grpc"), // etcd: discovery:///helloworld
//		grpc.WithDiscovery(d))
//
// Watch returns at once, so the dial never fails because the registry is
// down. GetService answers from memory after its first call.
//
// # Providers
//
// A Registrar registers a kratos.App's instance through an adapter's
// registrations, which keep it registered until Deregister:
//
//	r, _ := reboundkratos.NewRegistrar(reboundkratos.FormatEtcd,
//		func(ctx context.Context, key subscriber.Key, inst subscriber.Instance) (subscriber.Registration, error) {
//			return etcd.Register(ctx, client, key, inst, etcd.WithLayout(reboundkratos.EtcdLayout("")))
//		})
//	app := kratos.New(kratos.Name("helloworld"), kratos.Server(srv), kratos.Registrar(r))
//
// Deregister drains: it deregisters and waits WithDrainDelay before kratos
// stops the servers. The formats, byte by byte, and the differences from
// the contrib registries are in docs/kratos.md.
package reboundkratos
