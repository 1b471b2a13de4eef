package etcd

import (
	"context"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/rebound-go/rebound/subscriber"
)

// Unexported names the external tests use.
const (
	DefaultPrefix  = defaultPrefix
	DefaultCluster = defaultCluster
	DefaultTTL     = defaultTTL
)

var (
	ErrNotConnected = errNotConnected
	InstanceID      = instanceID
	EncodeInstance  = encodeInstance
	DecodeInstance  = decodeInstance
)

func ServicePrefix(prefix string, key subscriber.Key) (string, error) {
	return servicePrefix("ServicePrefix", prefix, key)
}

func InstanceKey(prefix string, key subscriber.Key, id string) (string, error) {
	return instanceKey("InstanceKey", prefix, key, id)
}

// Options the tests use; users keep the defaults (the prefix
// "/rebound/services", an attempt timeout of 5 s).
var (
	WithPrefix         = withPrefix
	WithAttemptTimeout = withAttemptTimeout
)

// Registration is what Register returns, for the tests that read its
// lease and key.
type Registration = registration

// RegisterConcrete is Register, its result as a *Registration.
func RegisterConcrete(ctx context.Context, client *clientv3.Client, key subscriber.Key, inst subscriber.Instance, opts ...Option) (*Registration, error) {
	g, err := Register(ctx, client, key, inst, opts...)
	if err != nil {
		return nil, err
	}
	return g.(*registration), nil
}

// Lease returns the lease the instance is currently bound to.
func (g *registration) Lease() clientv3.LeaseID { return g.currentLease() }

// InstanceKey returns the instance's etcd key.
func (g *registration) InstanceKey() string { return g.key }
