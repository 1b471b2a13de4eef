package reboundkratos

import (
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/go-kratos/kratos/v2/registry"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/subscriber"
	"github.com/rebound-go/rebound/subscriber/etcd"
)

// Format says how kratos service instances are stored in the registry:
// the layout of one of kratos' contrib registries.
type Format int

const (
	// FormatNacos is contrib/registry/nacos' layout: one Nacos instance
	// per endpoint, in service "<name>.<scheme>"; clients dial
	// "discovery:///<name>.<scheme>".
	FormatNacos Format = iota + 1
	// FormatEtcd is contrib/registry/etcd's layout, through subscriber/etcd
	// with EtcdLayout: one key holding the ServiceInstance's JSON; clients
	// dial "discovery:///<name>".
	FormatEtcd
)

func (f Format) name() string {
	switch f {
	case FormatNacos:
		return "nacos"
	case FormatEtcd:
		return "etcd"
	}
	return "Format(" + strconv.Itoa(int(f)) + ")"
}

func (f Format) valid() bool { return f == FormatNacos || f == FormatEtcd }

// Metadata keys: the stored JSON of a kratos ServiceInstance (the etcd
// layout's Decode sets it, Encode writes it), and FormatNacos' keys, as
// kratos' contrib Nacos registry writes them.
const (
	metadataInstance = "reboundkratos.instance"
	metadataKind     = "kind"
	metadataVersion  = "version"
)

// The contrib registry's defaults: the scheme of an instance whose
// metadata has no "kind", the weight of a registered instance.
const (
	defaultKind        = "grpc"
	defaultNacosWeight = 100
)

// knownSchemes are the endpoint schemes kratos' transports produce and
// read: grpc and http, with "s" when TLS is on.
var knownSchemes = map[string]bool{"grpc": true, "grpcs": true, "http": true, "https": true}

// endpoint is a checked endpoint URL.
type endpoint struct {
	raw    string
	scheme string
	host   string
	port   uint64
}

// parseEndpoint checks one endpoint: a URL with a scheme kratos knows and
// a host:port with a numeric port.
func parseEndpoint(fn, arg, raw string) (endpoint, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return endpoint{}, &rebound.ArgumentError{Func: fn, Arg: arg, Reason: "is not a URL (want scheme://host:port, for example grpc://10.0.0.1:9000); got " + strconv.Quote(raw), Err: err}
	}
	if u.Scheme == "" || u.Host == "" {
		return endpoint{}, &rebound.ArgumentError{Func: fn, Arg: arg, Reason: "is not a URL with a scheme and a host:port (for example grpc://10.0.0.1:9000); got " + strconv.Quote(raw)}
	}
	if !knownSchemes[u.Scheme] {
		return endpoint{}, &rebound.ArgumentError{Func: fn, Arg: arg, Reason: "has scheme " + strconv.Quote(u.Scheme) + ", which kratos does not know (want grpc, grpcs, http or https); got " + strconv.Quote(raw)}
	}
	host, port, err := net.SplitHostPort(u.Host)
	if err != nil {
		return endpoint{}, &rebound.ArgumentError{Func: fn, Arg: arg, Reason: "has no host:port; got " + strconv.Quote(raw), Err: err}
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil || p == 0 || host == "" {
		return endpoint{}, &rebound.ArgumentError{Func: fn, Arg: arg, Reason: "must have a host and a port in 1..65535; got " + strconv.Quote(raw)}
	}
	return endpoint{raw: raw, scheme: u.Scheme, host: host, port: p}, nil
}

// checkInstance checks a ServiceInstance for Register and returns its
// parsed endpoints.
func checkInstance(fn string, f Format, si *registry.ServiceInstance) ([]endpoint, error) {
	if si == nil {
		return nil, &rebound.ArgumentError{Func: fn, Arg: "service", Reason: "is nil"}
	}
	if strings.TrimSpace(si.Name) == "" {
		return nil, &rebound.ArgumentError{Func: fn, Arg: "service.Name", Reason: "is empty or only white space"}
	}
	if strings.Contains(si.Name, "/") || strings.Contains(si.Name, "@@") {
		return nil, &rebound.ArgumentError{Func: fn, Arg: "service.Name", Reason: `must not contain "/" or "@@"; got ` + strconv.Quote(si.Name)}
	}
	if f == FormatEtcd && (strings.TrimSpace(si.ID) == "" || strings.Contains(si.ID, "/")) {
		return nil, &rebound.ArgumentError{Func: fn, Arg: "service.ID", Reason: `must not be empty nor contain "/" (it is the last segment of the etcd key); got ` + strconv.Quote(si.ID)}
	}
	if len(si.Endpoints) == 0 {
		return nil, &rebound.ArgumentError{Func: fn, Arg: "service.Endpoints", Reason: "is empty (an instance needs at least one endpoint)"}
	}
	eps := make([]endpoint, 0, len(si.Endpoints))
	seen := make(map[string]int, len(si.Endpoints))
	for i, raw := range si.Endpoints {
		arg := fmt.Sprintf("service.Endpoints[%d]", i)
		ep, err := parseEndpoint(fn, arg, raw)
		if err != nil {
			return nil, err
		}
		id := ep.scheme + "://" + net.JoinHostPort(ep.host, strconv.FormatUint(ep.port, 10))
		if j, ok := seen[id]; ok {
			return nil, &rebound.ArgumentError{Func: fn, Arg: arg, Reason: fmt.Sprintf("duplicates service.Endpoints[%d] (%s)", j, id)}
		}
		seen[id] = i
		eps = append(eps, ep)
	}
	return eps, nil
}

// decode turns one subscriber.Instance of the watched name into what
// kratos receives; ok is false for an instance that is left out.
func (d *Discovery) decode(name string, in subscriber.Instance) (*registry.ServiceInstance, bool) {
	if d.f == FormatEtcd {
		if raw, ok := in.Metadata[metadataInstance]; ok {
			var si registry.ServiceInstance
			if err := json.Unmarshal([]byte(raw), &si); err == nil {
				return &si, true
			}
		}
	} else if !(in.Healthy && in.Enabled && in.Weight > 0) {
		return nil, false
	}
	kind := in.Metadata[metadataKind]
	if kind == "" {
		kind = d.o.kind
	}
	return &registry.ServiceInstance{
		ID:        in.ID,
		Name:      name,
		Version:   in.Metadata[metadataVersion],
		Metadata:  in.Metadata,
		Endpoints: []string{kind + "://" + net.JoinHostPort(in.IP, strconv.FormatUint(in.Port, 10))},
	}, true
}

// EtcdLayout returns the key layout of kratos' contrib/registry/etcd, for
// subscriber/etcd's WithLayout, on both sides: key <prefix>/<name>/<id>
// holding the JSON of the ServiceInstance, byte for byte as the contrib
// registry writes it. An empty prefix is "/microservices"; a prefix ending
// with "/" makes every key an *rebound.ArgumentError. docs/kratos.md has
// the fields.
func EtcdLayout(prefix string) etcd.Layout { return etcdLayout{Prefix: prefix} }

// etcdLayout is EtcdLayout's etcd.Layout. Decode gives an Instance with the
// IP and port of the first endpoint that has a host:port, Weight 100,
// Healthy, Enabled, Ephemeral, Cluster "DEFAULT", and Metadata the
// instance's metadata plus metadataInstance (the stored JSON, which
// Discovery hands to kratos as it is). Encode stores the Instance's
// metadataInstance value under its ID (Registrar with FormatEtcd fills
// both).
type etcdLayout struct {
	// Prefix is the key prefix; empty means "/microservices" (the
	// contrib etcd registry's). It must not end with "/".
	Prefix string
}

const defaultEtcdPrefix = "/microservices"

func (l etcdLayout) prefix() string {
	if l.Prefix == "" {
		return defaultEtcdPrefix
	}
	return l.Prefix
}

// ServicePrefix returns Prefix + "/" + key.Service + "/". key.Namespace
// and key.Group must be empty (the layout has none), key.Service not
// empty and without "/".
func (l etcdLayout) ServicePrefix(key subscriber.Key) (string, error) {
	const fn = "reboundkratos.EtcdLayout.ServicePrefix"
	if strings.HasSuffix(l.Prefix, "/") {
		return "", &rebound.ArgumentError{Func: fn, Arg: "Prefix", Reason: `must not end with "/"; got ` + strconv.Quote(l.Prefix)}
	}
	if key.Namespace != "" || key.Group != "" {
		return "", &rebound.ArgumentError{Func: fn, Arg: "key", Reason: "must have an empty Namespace and Group (the kratos etcd layout has none); got " + strconv.Quote(key.String())}
	}
	if strings.TrimSpace(key.Service) == "" || strings.Contains(key.Service, "/") {
		return "", &rebound.ArgumentError{Func: fn, Arg: "key.Service", Reason: `must not be empty nor contain "/"; got ` + strconv.Quote(key.Service)}
	}
	return l.prefix() + "/" + key.Service + "/", nil
}

// Decode decodes the JSON ServiceInstance stored under the key whose
// last segment is id (see etcdLayout).
func (etcdLayout) Decode(id string, value []byte) (subscriber.Instance, error) {
	var si registry.ServiceInstance
	if err := json.Unmarshal(value, &si); err != nil {
		return subscriber.Instance{}, fmt.Errorf("reboundkratos: instance %q: %w", id, err)
	}
	inst := subscriber.Instance{ID: id, Weight: defaultNacosWeight, Healthy: true, Enabled: true, Ephemeral: true, Cluster: "DEFAULT"}
	for _, e := range si.Endpoints {
		u, err := url.Parse(e)
		if err != nil {
			continue
		}
		host, port, err := net.SplitHostPort(u.Host)
		if err != nil {
			continue
		}
		if p, err := strconv.ParseUint(port, 10, 16); err == nil {
			inst.IP, inst.Port = host, p
			break
		}
	}
	if inst.IP == "" {
		return subscriber.Instance{}, fmt.Errorf("reboundkratos: instance %q: no endpoint with a host:port in %q", id, si.Endpoints)
	}
	inst.Metadata = make(map[string]string, len(si.Metadata)+1)
	maps.Copy(inst.Metadata, si.Metadata)
	inst.Metadata[metadataInstance] = string(value)
	return inst, nil
}

// Encode returns inst.ID and inst.Metadata[metadataInstance] (which must
// be a JSON object): the key's last segment and its value.
func (etcdLayout) Encode(inst subscriber.Instance) (string, []byte, error) {
	const fn = "reboundkratos.EtcdLayout.Encode"
	if inst.ID == "" || strings.Contains(inst.ID, "/") {
		return "", nil, &rebound.ArgumentError{Func: fn, Arg: "inst.ID", Reason: `must not be empty nor contain "/"; got ` + strconv.Quote(inst.ID)}
	}
	raw, ok := inst.Metadata[metadataInstance]
	var probe map[string]json.RawMessage
	if !ok || json.Unmarshal([]byte(raw), &probe) != nil {
		return "", nil, &rebound.ArgumentError{Func: fn, Arg: "inst.Metadata[" + strconv.Quote(metadataInstance) + "]", Reason: "must hold the JSON object of a kratos ServiceInstance (register through reboundkratos.Registrar)"}
	}
	return inst.ID, []byte(raw), nil
}
