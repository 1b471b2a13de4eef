// Package nacostest provides an in-process Nacos 2.x naming server for
// tests, in the spirit of net/http/httptest.
//
// The server speaks the real gRPC protocol on a loopback port, so the
// unmodified nacos-sdk-go v2 naming client (clients.NewNamingClient)
// connects to it, registers ephemeral instances, subscribes, receives pushes
// and reconnects after a restart, exactly as against a Nacos server. It
// implements what that client uses: ServerCheckRequest, the bi-directional
// stream with ConnectionSetupRequest and pushes (NotifySubscriberRequest,
// acknowledged by the client), HealthCheckRequest, InstanceRequest,
// BatchInstanceRequest, SubscribeServiceRequest, ServiceQueryRequest and
// ServiceListRequest. Any other request type is answered with an
// ErrorResponse. There is no HTTP API, so persistent instances
// (RegisterInstanceParam.Ephemeral false, which the SDK sends over HTTP),
// authentication and the config service are not available.
//
// # Behaviour, as in Nacos 2.x
//
//   - A connection is its bi-directional stream. The instances a client
//     registers belong to its connection: when the stream ends (client
//     closed, [Server.DropStreams], [Server.Stop]) they are removed and the
//     change is pushed to the other subscribers. Requests on a connection
//     without an open stream get an ErrorResponse with errorCode 301, which
//     makes the SDK reconnect.
//   - A connection publishes one instance per service through
//     InstanceRequest: registering another replaces it, and deregistering
//     removes it whatever Ip and Port are named. BatchInstanceRequest
//     publishes several.
//   - Subscribers see instances filtered by the clusters they asked for and
//     never see disabled instances (Enable false, the zero value of
//     vo.RegisterInstanceParam.Enable). An empty ClusterName means
//     [DefaultCluster].
//   - Service infos carry the subscriber's clusters string verbatim and a
//     lastRefTime that strictly increases across every server of the
//     process, restarts included, so the SDK never drops a push as stale.
//   - A change to a service is pushed to every connection subscribed to it;
//     several changes in a row coalesce into one push with the latest list.
//   - After a subscribe the service is pushed to that connection, changed
//     or not (Nacos 2.x's ServiceSubscribedEvent; see [WithSubscribePush]
//     and [WithoutSubscribePush]).
//
// # Faults and observation
//
// [Server.Stop] and [Server.Start] simulate a crash and a restart on the
// same address. [Server.SetRefuseConnections], [Server.SetDelay],
// [Server.SetRequestError] and [Server.DropStreams] inject faults at run
// time. The faults users meet with a real Nacos 2.x are there too:
// [Server.SetRejection] rejects requests of one type the way Nacos' TPS
// control and auth filter do, in the handler's own response type (which
// nacos-sdk-go v2.3.2 reports as success), for the first N requests of
// every new connection (a reconnect storm) or a fraction of them;
// [Server.ForgetSubscribers] drops subscriptions without telling the
// clients; [Server.UpdateInstance] edits an instance as an operator
// would (a disable that registering again does not undo); [Server.ForgetClientInstances] forgets a client's instances
// without closing its connection (a failed Distro sync); [Server.LoseNextPush] loses the next push of a service ([Server.PendingPushes] says whether one is queued). [Server.Stats] counts requests by type, pushes and connections, and
// [WithRequestHook] observes each request as it arrives.
//
// # Three nodes
//
// [NewCluster] runs n nodes that share their clients' instances the way
// Nacos 2.x's Distro protocol does: each node copies its own clients'
// instances to the others after a sync delay ([WithSyncDelay], 1 s as in
// Nacos), a crashed node's copies expire on the others
// ([WithSyncedExpiry], 3 min), and a node that starts again loads its
// peers' data. Clients given every node ([Cluster.ServerConfigs]) fail
// over when their node crashes, to a node that may not have their data
// yet.
//
// # Using it with nacos-sdk-go
//
// Put [Server.ServerConfig] in the client's server list. With the SDK's
// defaults, test clients are slow and leave files behind; a test-friendly
// client configuration is:
//
//	srv, err := nacostest.NewServer()
//	if err != nil {
//		t.Fatal(err)
//	}
//	t.Cleanup(srv.Close)
//
//	client, err := clients.NewNamingClient(vo.NacosClientParam{
//		ClientConfig: &constant.ClientConfig{
//			TimeoutMs:            2000,
//			NotLoadCacheAtStart:  true,
//			UpdateCacheWhenEmpty: true, // else an empty list is never delivered
//			CacheDir:             nacostest.CacheDir(t), // not t.TempDir(): the SDK may write after CloseClient
//			LogDir:               nacostest.LogDir(), // the SDK's logger is global: one dir per test binary
//			LogLevel:             "error",
//			TLSCfg:               constant.TLSConfig{Appointed: true}, // ignore TLS environment variables
//		},
//		ServerConfigs: []constant.ServerConfig{srv.ServerConfig()},
//	})
//	if err != nil {
//		t.Fatal(err)
//	}
//	t.Cleanup(client.CloseClient)
//
//	// A provider, registered on the server side...
//	_ = srv.RegisterInstance("", "", "orders", nacostest.Instance{
//		Ip: "10.0.0.1", Port: 8080, Weight: 1, Healthy: true, Enable: true,
//	})
//	// ...is delivered to the client's subscription callback.
//	err = client.Subscribe(&vo.SubscribeParam{
//		ServiceName:       "orders",
//		SubscribeCallback: func(instances []model.Instance, err error) { /* ... */ },
//	})
//
// [ClientConfig] returns this configuration (with TimeoutMs 1000) for
// tests that do not need to spell it out, and [NewClientConfig] for
// programs with no testing.TB (a demo, a local development loop).
//
// Register instances from the client with Ephemeral: true (and Enable:
// true, or subscribers will not see them).
//
// # nacos-sdk-go v2.3.2 caveats for tests
//
// The SDK has a data race in its reconnect path: a test that makes a client
// reconnect (Stop and Start, DropStreams, refused connections that later
// succeed, timeouts) fails under the race detector; build such tests with
// "//go:build !race". CloseClient does not stop the SDK's UDP push receiver
// goroutine, and the SDK's log file writer starts a goroutine that never
// ends: go.uber.org/goleak needs to ignore them ([SDKLeaks]). Use
// [VerifyTestMain] as the TestMain of a package whose tests run the client:
// it checks for leaks with those exceptions and removes [LogDir]. This
// package's own goroutines all end before [Server.Stop] and [Server.Close]
// return.
package nacostest
