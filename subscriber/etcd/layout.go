package etcd

import (
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/rebound-go/rebound/subscriber"
)

// Defaults of the key layout (see the package documentation).
const (
	// DefaultPrefix is the key prefix under which instances live.
	DefaultPrefix = "/rebound/services"
	// DefaultNamespace and DefaultGroup replace an empty Key.Namespace and
	// Key.Group: the same defaults as Nacos, so that a Key means the same
	// service on both registries.
	DefaultNamespace = "public"
	DefaultGroup     = "DEFAULT_GROUP"
	// DefaultCluster replaces an empty Instance.Cluster, as in Nacos.
	DefaultCluster = "DEFAULT"
)

// record is the JSON value of an instance key.
type record struct {
	ID        string            `json:"id,omitempty"`
	IP        string            `json:"ip"`
	Port      uint64            `json:"port"`
	Weight    float64           `json:"weight"`
	Healthy   bool              `json:"healthy"`
	Enabled   bool              `json:"enabled"`
	Ephemeral bool              `json:"ephemeral"`
	Cluster   string            `json:"cluster,omitempty"`
	Metadata  map[string]string `json:"metadata,omitempty"`
}

// ServicePrefix returns the etcd key prefix holding the instances of key's
// service: prefix + "/" + namespace + "/" + group + "/" + service + "/",
// with DefaultNamespace and DefaultGroup for empty fields. key.Clusters is
// ignored (clusters filter instances, they are not part of the key).
//
// It returns an error wrapping subscriber.ErrInvalidArgument when
// key.Service is empty or a segment contains "/".
func ServicePrefix(prefix string, key subscriber.Key) (string, error) {
	return servicePrefix("ServicePrefix", prefix, key)
}

func servicePrefix(fn, prefix string, key subscriber.Key) (string, error) {
	ns, group := key.Namespace, key.Group
	if ns == "" {
		ns = DefaultNamespace
	}
	if group == "" {
		group = DefaultGroup
	}
	if key.Service == "" {
		return "", &subscriber.ArgumentError{Func: fn, Arg: "key.Service", Reason: "is empty"}
	}
	for _, seg := range []struct{ name, v string }{
		{"key.Namespace", ns}, {"key.Group", group}, {"key.Service", key.Service},
	} {
		if strings.Contains(seg.v, "/") {
			return "", &subscriber.ArgumentError{Func: fn, Arg: seg.name,
				Reason: fmt.Sprintf("%q contains %q, which separates the segments of etcd keys", seg.v, "/")}
		}
	}
	return prefix + "/" + ns + "/" + group + "/" + key.Service + "/", nil
}

// InstanceKey returns the etcd key of instance id of key's service:
// ServicePrefix(prefix, key) + id. id must not be empty nor contain "/".
func InstanceKey(prefix string, key subscriber.Key, id string) (string, error) {
	return instanceKey("InstanceKey", prefix, key, id)
}

func instanceKey(fn, prefix string, key subscriber.Key, id string) (string, error) {
	p, err := servicePrefix(fn, prefix, key)
	if err != nil {
		return "", err
	}
	if err := checkID(fn, "id", id); err != nil {
		return "", err
	}
	return p + id, nil
}

func checkID(fn, arg, id string) error {
	if id == "" {
		return &subscriber.ArgumentError{Func: fn, Arg: arg, Reason: "is empty"}
	}
	if strings.Contains(id, "/") {
		return &subscriber.ArgumentError{Func: fn, Arg: arg,
			Reason: fmt.Sprintf("%q contains %q, which separates the segments of etcd keys", id, "/")}
	}
	return nil
}

// InstanceID returns the ID an instance is registered under: inst.ID, or
// "ip:port" (net.JoinHostPort) when it is empty.
func InstanceID(inst subscriber.Instance) string {
	if inst.ID != "" {
		return inst.ID
	}
	return net.JoinHostPort(inst.IP, strconv.FormatUint(inst.Port, 10))
}

// EncodeInstance returns the JSON value stored for inst (see the package
// documentation for the format). An empty Cluster is stored as
// DefaultCluster; ID is stored as InstanceID(inst).
func EncodeInstance(inst subscriber.Instance) ([]byte, error) {
	if inst.IP == "" {
		return nil, &subscriber.ArgumentError{Func: "EncodeInstance", Arg: "inst.IP", Reason: "is empty"}
	}
	cluster := inst.Cluster
	if cluster == "" {
		cluster = DefaultCluster
	}
	return json.Marshal(record{
		ID:        InstanceID(inst),
		IP:        inst.IP,
		Port:      inst.Port,
		Weight:    inst.Weight,
		Healthy:   inst.Healthy,
		Enabled:   inst.Enabled,
		Ephemeral: inst.Ephemeral,
		Cluster:   cluster,
		Metadata:  inst.Metadata,
	})
}

// DecodeInstance decodes the JSON value of the instance key whose last
// segment is id. The key decides the instance's ID (the value's "id" is
// informational); an empty or missing "cluster" means DefaultCluster. It
// returns an error if data is not a JSON object of the documented form or
// has no "ip".
func DecodeInstance(id string, data []byte) (subscriber.Instance, error) {
	var r record
	if err := json.Unmarshal(data, &r); err != nil {
		return subscriber.Instance{}, fmt.Errorf("etcd: instance %q: %w", id, err)
	}
	if r.IP == "" {
		return subscriber.Instance{}, fmt.Errorf("etcd: instance %q: no ip", id)
	}
	if r.Cluster == "" {
		r.Cluster = DefaultCluster
	}
	return subscriber.Instance{
		ID:        id,
		IP:        r.IP,
		Port:      r.Port,
		Weight:    r.Weight,
		Healthy:   r.Healthy,
		Enabled:   r.Enabled,
		Ephemeral: r.Ephemeral,
		Cluster:   r.Cluster,
		Metadata:  r.Metadata,
	}, nil
}
