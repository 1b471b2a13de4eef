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

// parseTarget maps a target onto a subscriber.Key (the syntax is in the
// package doc); anything else is a *rebound.ArgumentError.
func parseTarget(target string) (subscriber.Key, error) {
	u, err := url.Parse(target)
	if err != nil {
		return subscriber.Key{}, targetError(target, "is not a URL", err)
	}
	return keyFromURL(target, *u)
}

// Target formats key as a target of scheme for grpc.NewClient; the Builder
// reads it back as key (its Clusters sorted, without repeats). A bad scheme,
// an empty Service or an unreadable cluster name is a
// *rebound.ArgumentError.
func Target(scheme string, key subscriber.Key) (string, error) {
	bad := func(arg, reason string) (string, error) {
		return "", &rebound.ArgumentError{Func: "reboundgrpc.Target", Arg: arg, Reason: reason}
	}
	if !validScheme(scheme) {
		return bad("scheme", "must be a lower-case URL scheme (a letter, then letters, digits, '+', '-' or '.'); got "+strconv.Quote(scheme))
	}
	if key.Service == "" {
		return bad("key.Service", "must not be empty")
	}
	for _, c := range key.Clusters {
		if c == "" || strings.Contains(c, ",") || strings.TrimSpace(c) != c {
			return bad("key.Clusters", "must be non-empty names without ',' and without leading or trailing white space; got "+strconv.Quote(c))
		}
	}
	u := url.URL{Scheme: scheme, Path: "/" + key.Service}
	q := url.Values{}
	if hostSafe(key.Namespace) {
		u.Host = key.Namespace
	} else {
		q.Set("namespace", key.Namespace)
	}
	if key.Group != "" {
		q.Set("group", key.Group)
	}
	if len(key.Clusters) > 0 {
		cs := slices.Clone(key.Clusters)
		slices.Sort(cs)
		q.Set("clusters", strings.Join(slices.Compact(cs), ","))
	}
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// hostSafe reports whether ns can be the authority of a target as it is:
// empty, or unreserved URL characters only (RFC 3986).
func hostSafe(ns string) bool {
	for _, c := range []byte(ns) {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '.', c == '_', c == '~':
		default:
			return false
		}
	}
	return true
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
	return &rebound.ArgumentError{Func: "reboundgrpc.Builder.Build", Arg: "target " + strconv.Quote(target), Reason: reason, Err: err}
}

func validScheme(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		switch {
		case c >= 'a' && c <= 'z':
		case i > 0 && (c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.'):
		default:
			return false
		}
	}
	return true
}
