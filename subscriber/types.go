package subscriber

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Key names one registry subscription: a service in a group and namespace,
// optionally restricted to some clusters. Empty Namespace and Group mean the
// registry's defaults (for Nacos: the client's namespace, "public" unless
// configured, and "DEFAULT_GROUP").
//
// A Key is a plain value; Subscribe copies Clusters, so the caller may reuse
// the slice afterwards.
type Key struct {
	Namespace string
	Group     string
	// Service is the service name; it must not be empty.
	Service string
	// Clusters restricts the subscription to these clusters; empty means
	// all. Order and repeats do not matter (String sorts them and prints
	// each once).
	Clusters []string
}

// String returns a readable, canonical form of k, for logs and pages: the
// service alone when Namespace and Group are empty ("orders"),
// "group/service" when only Group is set ("DEFAULT_GROUP/orders"),
// "namespace/group/service" when Namespace is set (with an empty group
// "namespace//service"), followed by "[c1,c2]" when clusters are set,
// sorted, each once. Two different keys may print alike (a '/' or '[' in a name):
// key a map by ID, not by String.
func (k Key) String() string {
	var b strings.Builder
	switch {
	case k.Namespace != "":
		b.WriteString(k.Namespace)
		b.WriteByte('/')
		b.WriteString(k.Group)
		b.WriteByte('/')
	case k.Group != "":
		b.WriteString(k.Group)
		b.WriteByte('/')
	}
	b.WriteString(k.Service)
	if len(k.Clusters) > 0 {
		cs := slices.Compact(slices.Sorted(slices.Values(k.Clusters)))
		b.WriteByte('[')
		b.WriteString(strings.Join(cs, ","))
		b.WriteByte(']')
	}
	return b.String()
}

// ID returns a comparable form of k, for map keys. Two Keys have one ID
// exactly when they name the same subscription: clusters in any order.
func (k Key) ID() string {
	var b strings.Builder
	for _, f := range [...]string{k.Namespace, k.Group, k.Service} {
		b.WriteString(strconv.Itoa(len(f)))
		b.WriteByte(':')
		b.WriteString(f)
	}
	if len(k.Clusters) > 0 {
		cs := slices.Compact(slices.Sorted(slices.Values(k.Clusters)))
		for _, c := range cs {
			b.WriteByte(',')
			b.WriteString(strconv.Itoa(len(c)))
			b.WriteByte(':')
			b.WriteString(c)
		}
	}
	return b.String()
}

// Instance is one registered instance of a service, as the registry reports
// it. Two instances are the same when all their fields are equal (Metadata
// compared as a map).
type Instance struct {
	// ID is the registry's instance id (may be empty for some registries).
	ID string
	// IP and Port are the instance's address.
	IP   string
	Port uint64
	// Weight is the load-balancing weight the provider registered.
	Weight float64
	// Healthy, Enabled and Ephemeral are the registry's flags for the
	// instance; the Manager delivers unhealthy and disabled instances too.
	Healthy   bool
	Enabled   bool
	Ephemeral bool
	// Cluster is the cluster the instance belongs to.
	Cluster string
	// Metadata is the provider's metadata. The Manager never modifies it;
	// listeners must not either.
	Metadata map[string]string
}

// Listener receives the full, sorted instance list of a subscription each
// time it changes. It is called from one goroutine per subscription, in
// order, never concurrently with itself nor under a lock; bursts may be
// coalesced, and no list is delivered twice in a row. It may keep the
// slice but must not modify it; a panic is recovered and logged.
type Listener func(instances []Instance)

// sortInstances sorts a list in place in the delivery order.
func sortInstances(list []Instance) {
	slices.SortFunc(list, func(a, b Instance) int {
		return cmp.Or(
			strings.Compare(a.IP, b.IP),
			cmp.Compare(a.Port, b.Port),
			strings.Compare(a.Cluster, b.Cluster),
			strings.Compare(a.ID, b.ID),
		)
	})
}

// sameInstances reports whether two sorted lists hold the same instances.
func sameInstances(a, b []Instance) bool {
	return slices.EqualFunc(a, b, func(x, y Instance) bool {
		return x.ID == y.ID && x.IP == y.IP && x.Port == y.Port &&
			(x.Weight == y.Weight || x.Weight != x.Weight && y.Weight != y.Weight) && // two NaNs are the same weight
			x.Healthy == y.Healthy && x.Enabled == y.Enabled &&
			x.Ephemeral == y.Ephemeral && x.Cluster == y.Cluster &&
			maps.Equal(x.Metadata, y.Metadata)
	})
}

// FilteredOut describes why no instance of list can be picked, for the
// error of a reader whose filter left none: "3 instances of orders, all
// disabled", or "3 instances of orders, none usable: 2 disabled, 1
// unhealthy". Each instance counts under its first reason: no address (an
// empty IP or a Port outside 1..65535), disabled, unhealthy, weight 0,
// else "refused by the filter". An empty key.Service is left out of the
// text; an empty list is "no instances of orders".
func FilteredOut(key Key, list []Instance) string {
	of := ""
	if key.Service != "" {
		of = " of " + key.String()
	}
	if len(list) == 0 {
		return "no instances" + of
	}
	reasons := [...]string{"without an address", "disabled", "unhealthy", "weight 0", "refused by the filter"}
	var counts [len(reasons)]int
	for _, in := range list {
		switch {
		case in.IP == "" || in.Port == 0 || in.Port > 65535:
			counts[0]++
		case !in.Enabled:
			counts[1]++
		case !in.Healthy:
			counts[2]++
		case in.Weight == 0:
			counts[3]++
		default:
			counts[4]++
		}
	}
	noun := "instances"
	if len(list) == 1 {
		noun = "instance"
	}
	head := fmt.Sprintf("%d %s%s", len(list), noun, of)
	var parts []string
	for i, n := range counts {
		if n == len(list) {
			if len(list) == 1 {
				return head + ", " + reasons[i]
			}
			return head + ", all " + reasons[i]
		}
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, reasons[i]))
		}
	}
	return head + ", none usable: " + strings.Join(parts, ", ")
}
