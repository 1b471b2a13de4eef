package reboundgrpc

import (
	"net/url"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/grpc/resolver"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/subscriber"
)

// ParseTarget maps a gRPC target onto a subscriber.Key. The syntax is
//
//	<scheme>://[namespace]/<service>[?group=G][&clusters=a,b][&namespace=N]
//
// for example "rebound:///orders", "rebound:///orders?group=shop&clusters=a,b"
// or "rebound://prod/orders". The authority (or the namespace parameter;
// not both) is the Key's Namespace; the path is its Service (it may contain
// '/'); group is its Group; clusters is a comma-separated list (the
// parameter may be repeated), in any order. Empty namespace and group mean
// the registry's defaults. Any other query parameter, an empty service, an
// empty cluster name, a repeated group or namespace, or a fragment is an
// error (a *rebound.ArgumentError naming the target). The scheme is not
// checked.
func ParseTarget(target string) (subscriber.Key, error) {
	u, err := url.Parse(target)
	if err != nil {
		return subscriber.Key{}, targetError(target, "is not a URL", err)
	}
	return keyFromURL(target, *u)
}

// Target formats key as a target of the given scheme, the inverse of
// ParseTarget: Target("rebound", key) for use with grpc.NewClient.
func Target(scheme string, key subscriber.Key) string {
	u := url.URL{Scheme: scheme, Host: key.Namespace, Path: "/" + key.Service}
	q := url.Values{}
	if key.Group != "" {
		q.Set("group", key.Group)
	}
	if len(key.Clusters) > 0 {
		cs := slices.Clone(key.Clusters)
		slices.Sort(cs)
		q.Set("clusters", strings.Join(cs, ","))
	}
	u.RawQuery = q.Encode()
	return u.String()
}

func keyFromTarget(t resolver.Target) (subscriber.Key, error) {
	return keyFromURL(t.URL.String(), t.URL)
}

func keyFromURL(target string, u url.URL) (subscriber.Key, error) {
	var key subscriber.Key
	if u.Fragment != "" {
		return key, targetError(target, "has a fragment ("+u.Fragment+"); use the query: ?group=G&clusters=a,b", nil)
	}
	if u.User != nil {
		return key, targetError(target, "has user information; the authority is the namespace", nil)
	}
	// Endpoint() as grpc-go computes it: the path without its leading '/',
	// or the opaque part of "scheme:service".
	svc := u.Opaque
	if svc == "" {
		svc = strings.TrimPrefix(u.Path, "/")
	}
	if svc == "" {
		return key, targetError(target, "has no service name: use <scheme>:///<service>", nil)
	}
	key.Service = svc
	key.Namespace = u.Host
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return key, targetError(target, "has a malformed query", err)
	}
	for name, vals := range q {
		switch name {
		case "group":
			if len(vals) > 1 {
				return key, targetError(target, "repeats the group parameter", nil)
			}
			key.Group = vals[0]
		case "namespace":
			if len(vals) > 1 || key.Namespace != "" && u.Host != "" {
				return key, targetError(target, "names the namespace twice (authority and namespace parameter)", nil)
			}
			key.Namespace = vals[0]
		case "clusters", "cluster":
			for _, v := range vals {
				for c := range strings.SplitSeq(v, ",") {
					c = strings.TrimSpace(c)
					if c == "" {
						return key, targetError(target, "has an empty cluster name in "+name+"="+v, nil)
					}
					if !slices.Contains(key.Clusters, c) {
						key.Clusters = append(key.Clusters, c)
					}
				}
			}
		default:
			return key, targetError(target, "has an unknown parameter "+name+" (known: group, clusters, namespace)", nil)
		}
	}
	slices.Sort(key.Clusters)
	return key, nil
}

func targetError(target, reason string, err error) error {
	return &rebound.ArgumentError{Func: "reboundgrpc.ParseTarget", Arg: "target " + strconv.Quote(target), Reason: reason, Err: err}
}
