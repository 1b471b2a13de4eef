package reboundgrpc

import (
	"maps"
	"math"
	"net"
	"strconv"

	"google.golang.org/grpc/attributes"
	"google.golang.org/grpc/experimental/balancer/weight"
	"google.golang.org/grpc/resolver"

	"github.com/rebound-go/rebound/subscriber"
)

// weightScale converts a registry weight into grpc-go's integer weight
// (experimental/balancer/weight): round(Weight * 100), at least 1.
const weightScale = 100

type instanceKey struct{}

// instanceAttr carries an Instance in attributes; Equal makes attribute
// comparison (which grpc-go does to detect changes) work on its map field.
type instanceAttr struct{ in subscriber.Instance }

func (a instanceAttr) Equal(o any) bool {
	b, ok := o.(instanceAttr)
	if !ok {
		return false
	}
	x, y := a.in, b.in
	return x.ID == y.ID && x.IP == y.IP && x.Port == y.Port && x.Weight == y.Weight &&
		x.Healthy == y.Healthy && x.Enabled == y.Enabled && x.Ephemeral == y.Ephemeral &&
		x.Cluster == y.Cluster && maps.Equal(x.Metadata, y.Metadata)
}

// InstanceFromEndpoint returns the registry instance an endpoint was made
// from, for balancers. It reports false for an endpoint of another
// resolver. The Metadata map is shared: do not modify it.
func InstanceFromEndpoint(ep resolver.Endpoint) (subscriber.Instance, bool) {
	a, ok := ep.Attributes.Value(instanceKey{}).(instanceAttr)
	return a.in, ok
}

// scaledWeight returns the grpc-go weight of a registry weight.
func scaledWeight(w float64) uint32 {
	if !(w > 0) { // also NaN
		return 1
	}
	s := math.Round(w * weightScale)
	if s >= math.MaxUint32 {
		return math.MaxUint32
	}
	return max(uint32(s), 1)
}

// endpoints converts a list into the endpoints and addresses of a
// resolver.State, keeping the instances keep admits and have an address.
func endpoints(list []subscriber.Instance, keep func(subscriber.Instance) bool) (resolver.State, int) {
	var st resolver.State
	filtered := 0
	for _, in := range list {
		if in.IP == "" || in.Port == 0 || in.Port > math.MaxUint16 || !keep(in) {
			filtered++
			continue
		}
		// The instance travels in the Endpoint's attributes (an address
		// inside an endpoint carries none: grpc-go deprecates its
		// BalancerAttributes there, and its Attributes would make a
		// metadata change reconnect).
		addr := resolver.Address{Addr: net.JoinHostPort(in.IP, strconv.FormatUint(in.Port, 10))}
		ep := resolver.Endpoint{
			Addresses:  []resolver.Address{addr},
			Attributes: attributes.New(instanceKey{}, instanceAttr{in}),
		}
		ep = weight.Set(ep, weight.EndpointInfo{Weight: scaledWeight(in.Weight)})
		st.Endpoints = append(st.Endpoints, ep)
		st.Addresses = append(st.Addresses, addr)
	}
	return st, filtered
}
