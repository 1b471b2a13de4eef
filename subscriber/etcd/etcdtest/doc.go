// Package etcdtest runs a real etcd cluster (go.etcd.io/etcd/server/v3,
// embed) inside the test process, on loopback ports, for tests of code
// that uses etcd, in the spirit of net/http/httptest:
//
//	c, err := etcdtest.NewCluster(3, etcdtest.WithDir(t.TempDir()))
//	if err != nil {
//		t.Fatal(err)
//	}
//	t.Cleanup(func() { _ = c.Close() })
//	cli, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), Logger: zap.NewNop()})
//
// # Faults
//
// [Cluster.BlackholeMember] makes a running member unreachable for its
// clients without closing their connections (a partition, a frozen host),
// until [Cluster.HealMember]. [Cluster.StopMember] crashes one member: the connections of its clients
// are dropped at once and the server stops without handing its leadership
// over; its data stays. [Cluster.StartMember] restarts it with its data on
// the same addresses. [Cluster.Stop] and [Cluster.Start] do the same to
// the whole cluster; [Cluster.Wipe] also deletes the data, so that the next
// Start forms a new, empty cluster on the same addresses (revisions start
// again from 1). Stopping two members of three takes the quorum away; the
// remaining member has no leader. [Cluster.Leader], [Cluster.WaitLeader] and
// [Cluster.WaitReady] observe the cluster.
//
// Clients reach each member through a small TCP proxy owned by the
// Cluster, on the member's advertised client address: stopping a member
// closes the proxy, so clients see a crash (not a graceful shutdown, which
// would wait for open watch streams) and reconnect later to the same
// address.
//
// # Observation
//
// [Cluster.Stats] counts the requests the members received, by name
// ("Range", "Put", "Watch.Create", ...), including those a member
// rejected (for example without a leader); [WithRequestHook] sees each one
// as it arrives.
//
// # Settings
//
// Members run with etcd's defaults (heartbeat 100 ms, election 1 s; see
// [WithElection]), a quiet logger ([WithLogger], default none; the global
// zap and gRPC loggers are not touched), no gRPC gateway, and fsync
// disabled (UnsafeNoFsync): test data need not survive a power cut. Data
// lives in a temporary directory, or in [WithDir].
//
// # Goroutines
//
// When Close returns, the members and the proxies have stopped. etcd's
// peer connections between members (rafthttp, whose reads time out after
// 5 s) may end up to about 5 s later: a goroutine-leak check at the end of
// a test binary (go.uber.org/goleak) should retry for that long; no
// goroutine stays for good.
package etcdtest
