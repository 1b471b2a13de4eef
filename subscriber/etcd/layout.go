package etcd

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/subscriber"
)

// Defaults of the key layout (see the package documentation): the prefix,
// and the namespace, group and cluster of Nacos, so that a Key means the
// same service on both registries.
const (
	defaultPrefix    = "/rebound/services"
	defaultNamespace = "public"
	defaultGroup     = "DEFAULT_GROUP"
	defaultCluster   = "DEFAULT"
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

// servicePrefix returns the key prefix of key's service in the default
// layout: prefix/namespace/group/service/ (see the package documentation).
func servicePrefix(fn, prefix string, key subscriber.Key) (string, error) {
	ns, group := key.Namespace, key.Group
	if ns == "" {
		ns = defaultNamespace
	}
	if group == "" {
		group = defaultGroup
	}
	if key.Service == "" {
		return "", &rebound.ArgumentError{Func: "etcd." + fn, Arg: "key.Service", Reason: "must not be empty"}
	}
	for _, seg := range []struct{ name, v string }{
		{"key.Namespace", ns}, {"key.Group", group}, {"key.Service", key.Service},
	} {
		if strings.Contains(seg.v, "/") {
			return "", &rebound.ArgumentError{Func: "etcd." + fn, Arg: seg.name,
				Reason: fmt.Sprintf("must not contain %q, which separates the segments of etcd keys; got %q", "/", seg.v)}
		}
	}
	return prefix + "/" + ns + "/" + group + "/" + key.Service + "/", nil
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
		return &rebound.ArgumentError{Func: "etcd." + fn, Arg: arg, Reason: "must not be empty"}
	}
	if strings.Contains(id, "/") {
		return &rebound.ArgumentError{Func: "etcd." + fn, Arg: arg,
			Reason: fmt.Sprintf("must not contain %q, which separates the segments of etcd keys; got %q", "/", id)}
	}
	return nil
}

// instanceID returns the ID an instance is registered under: inst.ID, or
// "ip:port" (net.JoinHostPort) when it is empty.
func instanceID(inst subscriber.Instance) string {
	if inst.ID != "" {
		return inst.ID
	}
	return net.JoinHostPort(inst.IP, strconv.FormatUint(inst.Port, 10))
}

// encodeInstance returns the JSON value of inst in the default layout.
func encodeInstance(inst subscriber.Instance) ([]byte, error) {
	if inst.IP == "" {
		return nil, argErr("Register", "inst.IP", "must not be empty")
	}
	cluster := inst.Cluster
	if cluster == "" {
		cluster = defaultCluster
	}
	return json.Marshal(record{
		ID:        instanceID(inst),
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

// decodeInstance decodes a JSON value of the default layout; the key's
// last segment, id, is the instance's ID.
func decodeInstance(id string, data []byte) (subscriber.Instance, error) {
	var r record
	if err := json.Unmarshal(data, &r); err != nil {
		return subscriber.Instance{}, fmt.Errorf("etcd: instance %q: %w", id, err)
	}
	if r.IP == "" {
		return subscriber.Instance{}, fmt.Errorf("etcd: instance %q: no ip", id)
	}
	if r.Cluster == "" {
		r.Cluster = defaultCluster
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

// A Layout maps services to etcd keys and instances to values: the
// instances of a service are the keys directly below one prefix, each
// key's last part being the instance's ID. The Registry reads it (New)
// and Register writes it; use the same layout on both sides.
//
// Two layouts come with the package: the rebound layout (the default, see
// the package documentation) and EndpointsLayout,
// the layout of etcd's own client/v3/naming/endpoints. Another
// framework's layout is a small type implementing these three methods
// (docs/etcd.md, "Other layouts"). A Layout must be safe
// for concurrent use.
type Layout interface {
	// ServicePrefix returns the key prefix holding key's instances,
	// ending with "/" (or whatever separates it from the IDs). It returns
	// a *rebound.ArgumentError for a key the layout cannot express.
	// key.Clusters is not part of the prefix: the Registry filters on
	// Instance.Cluster.
	ServicePrefix(key subscriber.Key) (string, error)
	// Decode decodes the value of the key ServicePrefix + id. An error
	// skips the key (logged at Warn), unless it wraps ErrNotInstance
	// (skipped silently: a key that is not an instance, for example one
	// nested below an instance key).
	Decode(id string, value []byte) (subscriber.Instance, error)
	// Encode returns the ID (the key's last part, after ServicePrefix)
	// and the value Register stores for inst.
	Encode(inst subscriber.Instance) (id string, value []byte, err error)
}

// ErrNotInstance is wrapped by a Layout's Decode error for a key that is
// not an instance and is skipped without a log line.
var ErrNotInstance = errors.New("etcd: not an instance key")

// reboundLayout is the default layout under prefix.
type reboundLayout struct{ prefix string }

func (l reboundLayout) ServicePrefix(key subscriber.Key) (string, error) {
	return servicePrefix("ServicePrefix", l.prefix, key)
}

func (l reboundLayout) Decode(id string, value []byte) (subscriber.Instance, error) {
	if strings.Contains(id, "/") {
		return subscriber.Instance{}, ErrNotInstance // below an instance key
	}
	return decodeInstance(id, value)
}

func (l reboundLayout) Encode(inst subscriber.Instance) (string, []byte, error) {
	id := instanceID(inst)
	if err := checkID("InstanceKey", "id", id); err != nil {
		return "", nil, err
	}
	v, err := encodeInstance(inst)
	return id, v, err
}

// EndpointsLayout returns the layout of etcd's client/v3/naming/endpoints
// and its gRPC resolver: the endpoints of a target are the keys
// "<target>/<key>", each with a JSON value {"Op":0,"Addr":"host:port",
// "Metadata":...}. target gives the endpoints target of a key (nil:
// key.Service, with no Namespace or Group). docs/etcd.md says how fields
// map.
func EndpointsLayout(target func(key subscriber.Key) (string, error)) Layout {
	return endpointsLayout{target}
}

// endpointsLayout is EndpointsLayout's Layout.
type endpointsLayout struct {
	target func(key subscriber.Key) (string, error)
}

// endpointRecord is endpoints' internal.Update.
type endpointRecord struct {
	Op       uint8
	Addr     string
	Metadata any
}

// ServicePrefix returns target(key) + "/".
func (l endpointsLayout) ServicePrefix(key subscriber.Key) (string, error) {
	var target string
	if l.target != nil {
		t, err := l.target(key)
		if err != nil {
			return "", err
		}
		target = t
	} else {
		if key.Namespace != "" && key.Namespace != defaultNamespace {
			return "", argErr("EndpointsLayout", "key.Namespace", "must be empty (the endpoints layout has none); got "+strconv.Quote(key.Namespace))
		}
		if key.Group != "" && key.Group != defaultGroup {
			return "", argErr("EndpointsLayout", "key.Group", "must be empty (the endpoints layout has none); got "+strconv.Quote(key.Group))
		}
		target = key.Service
	}
	if target == "" || strings.HasSuffix(target, "/") {
		return "", argErr("EndpointsLayout", "key.Service", "must give a target that is not empty and does not end with \"/\"; got "+strconv.Quote(target))
	}
	return target + "/", nil
}

// Decode decodes an endpoints value (see EndpointsLayout).
func (endpointsLayout) Decode(id string, value []byte) (subscriber.Instance, error) {
	var r endpointRecord
	if err := json.Unmarshal(value, &r); err != nil {
		return subscriber.Instance{}, fmt.Errorf("etcd: endpoint %q: %w", id, err)
	}
	if r.Op != 0 || r.Addr == "" {
		return subscriber.Instance{}, fmt.Errorf("etcd: endpoint %q: no address (op %d)", id, r.Op)
	}
	inst := subscriber.Instance{ID: id, IP: r.Addr, Weight: 1, Healthy: true, Enabled: true, Cluster: defaultCluster}
	if host, port, err := net.SplitHostPort(r.Addr); err == nil {
		if p, err := strconv.ParseUint(port, 10, 16); err == nil {
			inst.IP, inst.Port = host, p
		}
	}
	switch md := r.Metadata.(type) {
	case nil:
	case map[string]any:
		inst.Metadata = make(map[string]string, len(md))
		for k, v := range md {
			if s, ok := v.(string); ok {
				inst.Metadata[k] = s
			} else if b, err := json.Marshal(v); err == nil {
				inst.Metadata[k] = string(b)
			}
		}
	default:
		if b, err := json.Marshal(md); err == nil {
			inst.Metadata = map[string]string{"metadata": string(b)}
		}
	}
	return inst, nil
}

// Encode returns the instance ID (inst.ID, or ip:port) and the endpoints value of inst.
func (endpointsLayout) Encode(inst subscriber.Instance) (string, []byte, error) {
	if inst.IP == "" {
		return "", nil, argErr("Register", "inst.IP", "must not be empty")
	}
	rec := endpointRecord{Addr: net.JoinHostPort(inst.IP, strconv.FormatUint(inst.Port, 10))}
	if len(inst.Metadata) > 0 {
		rec.Metadata = inst.Metadata
	}
	v, err := json.Marshal(rec)
	return instanceID(inst), v, err
}
