package etcd

import (
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
)

// Settings of ClientConfig; the reasons are in the package documentation
// ("Leases and keep-alive") and docs/grpc.md.
const (
	clientReconnectMax     = 750 * time.Millisecond
	clientKeepAliveTime    = 10 * time.Second // gRPC's minimum
	clientKeepAliveTimeout = 3 * time.Second
)

// ClientConfig returns a clientv3.Config for endpoints suited to a
// Registry and to Register; add TLS or credentials to it. The client logs
// to log (nil: nowhere) and does not retry reads itself (the Manager
// does). It reconnects within 750 ms of a member's return and drops a
// dead connection within 13 s (keep-alive 10 s, timeout 3 s).
func ClientConfig(log *zap.Logger, endpoints ...string) clientv3.Config {
	if log == nil {
		log = zap.NewNop()
	}
	return clientv3.Config{
		Endpoints:            endpoints,
		Logger:               log,
		MaxUnaryRetries:      1,
		DialKeepAliveTime:    clientKeepAliveTime,
		DialKeepAliveTimeout: clientKeepAliveTimeout,
		DialOptions: []grpc.DialOption{
			grpc.WithConnectParams(grpc.ConnectParams{
				Backoff: backoff.Config{
					BaseDelay:  250 * time.Millisecond,
					Multiplier: 1.6,
					Jitter:     0.2,
					MaxDelay:   clientReconnectMax,
				},
				MinConnectTimeout: 5 * time.Second,
			}),
		},
	}
}
