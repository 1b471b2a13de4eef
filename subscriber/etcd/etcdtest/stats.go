package etcdtest

import (
	"context"
	"maps"
	"strings"
	"sync"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
)

// Names of the requests counted by [Cluster.Stats] and passed to the hook of
// [WithRequestHook]. A unary call is named after its gRPC method without
// the service ("Range", "Put", "Txn", "DeleteRange", "Compact",
// "LeaseGrant", "LeaseRevoke", "MemberList", ...); a stream counts once
// when it opens ("Watch", "LeaseKeepAlive"), and every request sent on a
// Watch stream counts too, with the names below.
const (
	RequestRange          = "Range"
	RequestPut            = "Put"
	RequestTxn            = "Txn"
	RequestDeleteRange    = "DeleteRange"
	RequestCompact        = "Compact"
	RequestLeaseGrant     = "LeaseGrant"
	RequestLeaseRevoke    = "LeaseRevoke"
	RequestWatch          = "Watch"          // a Watch stream opened
	RequestWatchCreate    = "Watch.Create"   // a watcher created on a Watch stream
	RequestWatchCancel    = "Watch.Cancel"   // a watcher cancelled on a Watch stream
	RequestWatchProgress  = "Watch.Progress" // a progress request on a Watch stream
	RequestLeaseKeepAlive = "LeaseKeepAlive" // a LeaseKeepAlive stream opened
)

// Request describes one request a member received, for [WithRequestHook].
type Request struct {
	// Member is the index of the member that received it (0-based, as in
	// [Cluster.Endpoint]).
	Member int
	// Name is the request's name (see RequestRange and the other
	// constants).
	Name string
}

// Stats counts the requests the members received, by name (see
// RequestRange and the other constants), over every member and every run.
type Stats struct {
	Requests map[string]int64
}

type counters struct {
	mu   sync.Mutex
	byID map[string]int64
}

func (c *counters) add(name string) {
	c.mu.Lock()
	c.byID[name]++
	c.mu.Unlock()
}

func (c *counters) snapshot() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return Stats{Requests: maps.Clone(c.byID)}
}

func (c *counters) reset() {
	c.mu.Lock()
	clear(c.byID)
	c.mu.Unlock()
}

// shortMethod turns "/etcdserverpb.KV/Range" into "Range".
func shortMethod(full string) string {
	if i := strings.LastIndexByte(full, '/'); i >= 0 {
		return full[i+1:]
	}
	return full
}

// serverOptions returns the gRPC server options that count (and report)
// the requests member idx receives.
func (c *Cluster) serverOptions(idx int) []grpc.ServerOption {
	seen := func(name string) {
		c.stats.add(name)
		if h := c.opts.hook; h != nil {
			h(Request{Member: idx, Name: name})
		}
	}
	unary := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		seen(shortMethod(info.FullMethod))
		return handler(ctx, req)
	}
	stream := func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		name := shortMethod(info.FullMethod)
		seen(name)
		if name == RequestWatch {
			ss = &watchStream{ServerStream: ss, seen: seen}
		}
		return handler(srv, ss)
	}
	// The single (not chained) interceptors run before etcd's own chain,
	// so that requests etcd rejects (no leader, for example) count too.
	return []grpc.ServerOption{
		grpc.UnaryInterceptor(unary),
		grpc.StreamInterceptor(stream),
	}
}

// watchStream counts the requests received on a Watch stream.
type watchStream struct {
	grpc.ServerStream
	seen func(string)
}

func (w *watchStream) RecvMsg(m any) error {
	err := w.ServerStream.RecvMsg(m)
	if err != nil {
		return err
	}
	if req, ok := m.(*pb.WatchRequest); ok {
		switch {
		case req.GetCreateRequest() != nil:
			w.seen(RequestWatchCreate)
		case req.GetCancelRequest() != nil:
			w.seen(RequestWatchCancel)
		case req.GetProgressRequest() != nil:
			w.seen(RequestWatchProgress)
		}
	}
	return nil
}
