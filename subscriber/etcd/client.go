package etcd

import (
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
)

// Settings of ClientConfig.
const (
	// ClientReconnectMax caps the gRPC reconnect backoff of ClientConfig's
	// client, so that a member's return is noticed within a second (at
	// most 0.9 s with gRPC's 20% jitter; gRPC's default cap is 120 s,
	// which can keep a client away from a recovered cluster for two
	// minutes). The cost: while a member is down, the client dials it
	// about once a second (a refused TCP connect on a host that is up).
	ClientReconnectMax = 750 * time.Millisecond
	// ClientKeepAliveTime and ClientKeepAliveTimeout make the client ping
	// a connection that received nothing for ClientKeepAliveTime and drop
	// it if the ping is not answered within ClientKeepAliveTimeout, so
	// that a member that stopped answering (a partition, a frozen host)
	// is left for another within 13 s. 10 s is gRPC's minimum (smaller
	// values are raised to it). A Registration's TTL must leave room for
	// this detection (see DefaultTTL and the package documentation,
	// "Leases and keep-alive"); the previous 5 s timeout with a 10 s TTL
	// did not.
	ClientKeepAliveTime    = 10 * time.Second
	ClientKeepAliveTimeout = 3 * time.Second
)

// ClientConfig returns a clientv3.Config for endpoints suited to a
// Registry and to Register. Start from it and add TLS or credentials as
// needed:
//
//   - Logger is log, or zap.NewNop() when log is nil (without a logger the
//     client builds its own at Info level, writing to stderr);
//   - MaxUnaryRetries is 1: the client's own retry of reads on
//     codes.Unavailable (100 retries, 25 ms apart, by default) would hide
//     an outage inside one attempt and send 40 requests a second per
//     subscription to a member without a leader; the Manager's jittered
//     loop does the retrying instead;
//   - the gRPC reconnect backoff is capped at ClientReconnectMax, and
//     keep-alive pings (ClientKeepAliveTime, ClientKeepAliveTimeout) detect
//     dead connections;
//   - DialTimeout stays 0: clientv3.New does not block, a cluster that is
//     down at start is retried by the Manager.
func ClientConfig(log *zap.Logger, endpoints ...string) clientv3.Config {
	if log == nil {
		log = zap.NewNop()
	}
	return clientv3.Config{
		Endpoints:            endpoints,
		Logger:               log,
		MaxUnaryRetries:      1,
		DialKeepAliveTime:    ClientKeepAliveTime,
		DialKeepAliveTimeout: ClientKeepAliveTimeout,
		DialOptions: []grpc.DialOption{
			grpc.WithConnectParams(grpc.ConnectParams{
				Backoff: backoff.Config{
					BaseDelay:  250 * time.Millisecond,
					Multiplier: 1.6,
					Jitter:     0.2,
					MaxDelay:   ClientReconnectMax,
				},
				MinConnectTimeout: 5 * time.Second,
			}),
		},
	}
}
