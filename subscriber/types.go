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
// optionally limited to some clusters. Empty Namespace and Group are the
// registry's defaults. Subscribe copies Clusters.
type Key struct {
	Namespace string
	Group     string
	Service   string   // required
	Clusters  []string // empty: all; order and repeats do not matter
}

// String returns k in a readable form, such as "ns/group/orders[a,b]". Two
// Keys print alike exactly when they name the same subscription (clusters
// in any order), so it serves as a map key. A name holding / [ ] , or a
// double quote is quoted.
func (k Key) String() string {
	var b strings.Builder
	switch {
	case k.Namespace != "":
		writeKeyName(&b, k.Namespace)
		b.WriteByte('/')
		writeKeyName(&b, k.Group)
		b.WriteByte('/')
	case k.Group != "":
		writeKeyName(&b, k.Group)
		b.WriteByte('/')
	}
	writeKeyName(&b, k.Service)
	if len(k.Clusters) > 0 {
		b.WriteByte('[')
		for i, c := range slices.Compact(slices.Sorted(slices.Values(k.Clusters))) {
			if i > 0 {
				b.WriteByte(',')
			}
			writeKeyName(&b, c)
		}
		b.WriteByte(']')
	}
	return b.String()
}

// writeKeyName writes one name of a Key, quoted if it holds a character
// that separates names in Key.String.
func writeKeyName(b *strings.Builder, name string) {
	if strings.ContainsAny(name, `/[],"`) {
		b.WriteString(strconv.Quote(name))
		return
	}
	b.WriteString(name)
}

// Instance is one registered instance of a service, as the registry
// reports it. Two instances are the same when all fields are equal.
type Instance struct {
	ID        string // the registry's instance id; may be empty
	IP        string
	Port      uint64
	Weight    float64
	Healthy   bool // the Manager delivers unhealthy and disabled instances too
	Enabled   bool
	Ephemeral bool
	Cluster   string
	Metadata  map[string]string // never modified by the Manager; do not modify it
}

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

// FilteredOut says why no instance of list can be picked, for a reader's
// error: "3 instances of orders, all disabled". Each instance counts under
// its first reason: no address, disabled, unhealthy, weight 0, the filter.
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
