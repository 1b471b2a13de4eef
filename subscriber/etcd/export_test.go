package etcd

import (
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

// Lease returns the lease the instance is currently bound to.
func (g *Registration) Lease() clientv3.LeaseID { return g.currentLease() }
