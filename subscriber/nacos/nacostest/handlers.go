package nacostest

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	nacospb "github.com/nacos-group/nacos-sdk-go/v2/api/grpc"
	"github.com/nacos-group/nacos-sdk-go/v2/model"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// conn is one client connection, identified by its peer address (the SDK
// never sends its connection id back). It exists while its bi-directional
// stream is open. Its maps are guarded by Server.mu.
type conn struct {
	addr      string
	published map[svcKey][]published    // ephemeral instances, by service
	subs      map[subscription]subEcho  // subscriptions
	dirty     map[subscription]struct{} // subscriptions to push
	seen      map[string]int            // requests by type, for Rejection.FirstPerConnection
	lose      map[svcKey]int            // pushes to lose, by service (LoseNextPush)
	wake      chan struct{}             // capacity 1: dirty is not empty
	drop      chan struct{}             // closed by DropStreams
	dropOnce  sync.Once
}

func newConn(addr string) *conn {
	return &conn{
		addr:      addr,
		published: map[svcKey][]published{},
		subs:      map[subscription]subEcho{},
		dirty:     map[subscription]struct{}{},
		seen:      map[string]int{},
		lose:      map[svcKey]int{},
		wake:      make(chan struct{}, 1),
		drop:      make(chan struct{}),
	}
}

func (c *conn) wakeUp() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

func peerAddr(ctx context.Context) string {
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		return p.Addr.String()
	}
	return ""
}

var pushSeq atomic.Uint64

// requestService implements the unary /Request/request.
type requestService struct{ s *Server }

func (h requestService) Request(ctx context.Context, p *nacospb.Payload) (*nacospb.Payload, error) {
	s := h.s
	r, ok := s.enter()
	if !ok {
		return nil, status.Error(codes.Unavailable, "nacostest: server stopped")
	}
	defer r.wg.Done()

	typ := p.GetMetadata().GetType()
	s.countRequest(typ)

	if d := time.Duration(s.faults.delay.Load()); d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, status.FromContextError(ctx.Err()).Err()
		case <-r.stop:
			t.Stop()
			return nil, status.Error(codes.Unavailable, "nacostest: server stopped")
		}
	}

	body := p.GetBody().GetValue()
	if len(body) == 0 {
		body = []byte("{}")
	}
	var head namingRequest
	if err := json.Unmarshal(body, &head); err != nil {
		return s.fail("", codeInvalidParam, fmt.Sprintf("nacostest: %s: malformed JSON body: %v", typ, err)), nil
	}

	if typ == RequestServerCheck {
		if s.faults.refuse.Load() {
			s.stats.add(&s.stats.refused)
			return nil, status.Error(codes.Unavailable, "nacostest: refusing connections")
		}
	}
	if code, msg, ok := s.requestError(typ); ok {
		return s.fail(head.RequestID, code, msg), nil
	}

	addr := peerAddr(ctx)
	if typ == RequestServerCheck {
		id := strconv.FormatInt(time.Now().UnixMilli(), 10) + "_" + strings.ReplaceAll(addr, ":", "_")
		return encode(typeServerCheckResponse, serverCheckResponse{response: okResponse(head.RequestID), ConnectionID: id}), nil
	}

	s.mu.Lock()
	c := s.conns[addr]
	s.mu.Unlock()
	if c == nil {
		return s.fail(head.RequestID, ErrorCodeUnregistered, "Connection is unregistered."), nil
	}
	if _, known := responseTypes[typ]; known {
		if p := s.rejection(c, typ, head.RequestID, body); p != nil {
			return p, nil
		}
	}
	return s.dispatch(c, typ, head, body), nil
}

func (s *Server) countRequest(typ string) {
	s.stats.request(typ)
	if s.opts.hook != nil {
		s.opts.hook(typ)
	}
}

func (s *Server) fail(requestID string, code int, msg string) *nacospb.Payload {
	s.stats.add(&s.stats.errs)
	return errorPayload(requestID, code, msg)
}

// dispatch answers a request from a registered connection. The reply type
// must be the one the SDK type-asserts for the request, or it panics.
func (s *Server) dispatch(c *conn, typ string, head namingRequest, body []byte) *nacospb.Payload {
	id := head.RequestID
	bad := func(err error) *nacospb.Payload {
		return s.fail(id, codeInvalidParam, fmt.Sprintf("nacostest: %s: malformed JSON body: %v", typ, err))
	}
	switch typ {
	case RequestHealthCheck:
		return encode(typeHealthCheckResponse, okResponse(id))

	case RequestInstance:
		var req instanceRequest
		if err := json.Unmarshal(body, &req); err != nil {
			return bad(err)
		}
		return s.handleInstance(c, &req)

	case RequestBatchInstance:
		var req batchInstanceRequest
		if err := json.Unmarshal(body, &req); err != nil {
			return bad(err)
		}
		return s.handleBatch(c, &req)

	case RequestSubscribeService:
		var req subscribeServiceRequest
		if err := json.Unmarshal(body, &req); err != nil {
			return bad(err)
		}
		if req.ServiceName == "" {
			return s.fail(id, codeInvalidParam, "nacostest: SubscribeServiceRequest: serviceName is empty")
		}
		k := makeSvcKey(req.Namespace, req.GroupName, req.ServiceName)
		sub := subscription{svc: k, clusters: req.Clusters}
		echo := subEcho{group: req.GroupName, name: req.ServiceName}
		s.mu.Lock()
		if req.Subscribe {
			c.subs[sub] = echo
		} else {
			delete(c.subs, sub)
			delete(c.dirty, sub)
		}
		info := s.serviceInfoLocked(k, echo, req.Clusters, false)
		if req.Subscribe {
			s.pushAfterSubscribeLocked(c, sub)
		}
		s.mu.Unlock()
		return encode(typeSubscribeServiceResponse, serviceInfoResponse{response: okResponse(id), ServiceInfo: info})

	case RequestServiceQuery:
		var req serviceQueryRequest
		if err := json.Unmarshal(body, &req); err != nil {
			return bad(err)
		}
		if req.ServiceName == "" {
			return s.fail(id, codeInvalidParam, "nacostest: ServiceQueryRequest: serviceName is empty")
		}
		k := makeSvcKey(req.Namespace, req.GroupName, req.ServiceName)
		s.mu.Lock()
		info := s.serviceInfoLocked(k, subEcho{group: req.GroupName, name: req.ServiceName}, req.Cluster, req.HealthyOnly)
		s.mu.Unlock()
		return encode(typeQueryServiceResponse, serviceInfoResponse{response: okResponse(id), ServiceInfo: info})

	case RequestServiceList:
		var req serviceListRequest
		if err := json.Unmarshal(body, &req); err != nil {
			return bad(err)
		}
		k := makeSvcKey(req.Namespace, req.GroupName, "")
		s.mu.Lock()
		names := s.serviceNamesLocked(k.namespace, k.group)
		s.mu.Unlock()
		// Nacos' ServiceUtil.pageServiceName: 1-based pages.
		start := max((req.PageNo-1)*req.PageSize, 0)
		end := min(start+max(req.PageSize, 0), len(names))
		page := []string{}
		if start < len(names) {
			page = names[start:end]
		}
		return encode(typeServiceListResponse, serviceListResponse{response: okResponse(id), Count: len(names), ServiceNames: page})

	default:
		return s.fail(id, codeFail, "nacostest: no handler for request type "+strconv.Quote(typ))
	}
}

// handleInstance registers or deregisters the connection's instance of a
// service. Like Nacos 2.x, a connection publishes at most one instance per
// service through InstanceRequest: registering replaces the previous one,
// and deregistering removes it whatever Ip and Port the request names.
func (s *Server) handleInstance(c *conn, req *instanceRequest) *nacospb.Payload {
	id := req.RequestID
	k := makeSvcKey(req.Namespace, req.GroupName, req.ServiceName)
	switch req.Type {
	case "registerInstance":
		if err := validateInstance(req.ServiceName, req.Instance); err != nil {
			return s.fail(id, codeInvalidParam, err.Error())
		}
		in := normalize(k, req.Instance)
		s.mu.Lock()
		s.mutateLocked(k, func() {
			c.published[k] = []published{{inst: in, seq: s.nextSeqLocked()}}
		})
		s.syncConnLocked(c)
		s.mu.Unlock()
	case "deregisterInstance":
		s.mu.Lock()
		s.mutateLocked(k, func() { delete(c.published, k) })
		s.syncConnLocked(c)
		s.mu.Unlock()
	default:
		return s.fail(id, codeInvalidParam, fmt.Sprintf("nacostest: InstanceRequest: unsupported type %q", req.Type))
	}
	return encode(typeInstanceResponse, instanceResponse{response: okResponse(id), Type: req.Type})
}

// handleBatch replaces the connection's instances of a service
// (batchRegisterInstance) or removes them (batchDeregisterInstance).
func (s *Server) handleBatch(c *conn, req *batchInstanceRequest) *nacospb.Payload {
	id := req.RequestID
	k := makeSvcKey(req.Namespace, req.GroupName, req.ServiceName)
	switch req.Type {
	case "batchRegisterInstance":
		ins := make([]model.Instance, 0, len(req.Instances))
		for _, in := range req.Instances {
			if err := validateInstance(req.ServiceName, in); err != nil {
				return s.fail(id, codeInvalidParam, err.Error())
			}
			ins = append(ins, normalize(k, in))
		}
		s.mu.Lock()
		s.mutateLocked(k, func() {
			ps := make([]published, 0, len(ins))
			for _, in := range ins {
				ps = append(ps, published{inst: in, seq: s.nextSeqLocked()})
			}
			if len(ps) == 0 {
				delete(c.published, k)
			} else {
				c.published[k] = ps
			}
		})
		s.syncConnLocked(c)
		s.mu.Unlock()
	case "batchDeregisterInstance":
		s.mu.Lock()
		s.mutateLocked(k, func() {
			ps := slices.DeleteFunc(slices.Clone(c.published[k]), func(p published) bool {
				return slices.ContainsFunc(req.Instances, func(in model.Instance) bool { return keyOf(in) == keyOf(p.inst) })
			})
			if len(ps) == 0 {
				delete(c.published, k)
			} else {
				c.published[k] = ps
			}
		})
		s.syncConnLocked(c)
		s.mu.Unlock()
	default:
		return s.fail(id, codeInvalidParam, fmt.Sprintf("nacostest: BatchInstanceRequest: unsupported type %q", req.Type))
	}
	return encode(typeBatchInstanceResponse, instanceResponse{response: okResponse(id), Type: req.Type})
}

// streamService implements the bi-directional /BiRequestStream/requestBiStream.
type streamService struct{ s *Server }

func (h streamService) RequestBiStream(stream nacospb.BiRequestStream_RequestBiStreamServer) error {
	s := h.s
	r, ok := s.enter()
	if !ok {
		return status.Error(codes.Unavailable, "nacostest: server stopped")
	}
	defer r.wg.Done()

	c := newConn(peerAddr(stream.Context()))
	s.addConn(c)
	defer s.removeConn(c)

	recvDone := make(chan struct{})
	r.wg.Add(1) // safe: this handler holds a count
	go func() {
		defer r.wg.Done()
		defer close(recvDone)
		for {
			p, err := stream.Recv()
			if err != nil {
				return
			}
			s.handleStreamPayload(c, p)
		}
	}()

	// This goroutine is the stream's only sender. When it returns, gRPC
	// ends the stream and cancels its context, which ends Recv above.
	for {
		select {
		case <-r.stop:
			return status.Error(codes.Unavailable, "nacostest: server stopped")
		case <-c.drop:
			return status.Error(codes.Unavailable, "nacostest: stream dropped by DropStreams")
		case <-recvDone:
			return nil
		case <-stream.Context().Done():
			return status.FromContextError(stream.Context().Err()).Err()
		case <-c.wake:
			for _, p := range s.takePushes(c) {
				if err := stream.Send(p); err != nil {
					s.log.Debug("nacostest: push failed", zap.String("peer", c.addr), zap.Error(err))
					return err
				}
				s.stats.add(&s.stats.pushes)
			}
		}
	}
}

func (s *Server) addConn(c *conn) {
	s.stats.add(&s.stats.opened)
	s.mu.Lock()
	defer s.mu.Unlock()
	if old := s.conns[c.addr]; old != nil {
		// A second stream on the same connection replaces the first.
		s.removeConnLocked(old)
		old.dropOnce.Do(func() { close(old.drop) })
	}
	s.conns[c.addr] = c
	s.log.Debug("nacostest: connection open", zap.String("peer", c.addr))
}

// removeConn forgets a connection whose stream ended.
func (s *Server) removeConn(c *conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conns[c.addr] == c {
		s.removeConnLocked(c)
	}
}

// removeConnLocked forgets c, with its ephemeral instances (pushing the
// change to the remaining subscribers) and its subscriptions. s.mu must be
// held and c must be registered.
func (s *Server) removeConnLocked(c *conn) {
	svcs := make([]svcKey, 0, len(c.published))
	befores := make([][]model.Instance, 0, len(c.published))
	for k := range c.published {
		svcs = append(svcs, k)
		befores = append(befores, s.hostsLocked(k))
	}
	delete(s.conns, c.addr)
	// A closed connection is removed on the other nodes too; on a node
	// that is stopping (a crash) syncConnLocked sends nothing.
	s.syncConnLocked(c)
	for i, k := range svcs {
		if !equalHosts(befores[i], s.hostsLocked(k)) {
			s.notifyLocked(k)
		}
	}
	s.log.Debug("nacostest: connection closed", zap.String("peer", c.addr))
}

// takePushes builds the pending pushes of c, one per dirty subscription,
// from the current state.
func (s *Server) takePushes(c *conn) []*nacospb.Payload {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(c.dirty) == 0 {
		return nil
	}
	subs := make([]subscription, 0, len(c.dirty))
	for sub := range c.dirty {
		subs = append(subs, sub)
	}
	clear(c.dirty)
	out := make([]*nacospb.Payload, 0, len(subs))
	for _, sub := range subs {
		echo, ok := c.subs[sub]
		if !ok {
			continue // unsubscribed meanwhile
		}
		if c.lose[sub.svc] > 0 {
			c.lose[sub.svc]--
			if c.lose[sub.svc] == 0 {
				delete(c.lose, sub.svc)
			}
			s.stats.add(&s.stats.lost)
			continue
		}
		info := s.serviceInfoLocked(sub.svc, echo, sub.clusters, false)
		out = append(out, encode(typeNotifySubscriber, notifySubscriberRequest{
			namingRequest: namingRequest{
				RequestID:   strconv.FormatUint(pushSeq.Add(1), 10),
				Namespace:   sub.svc.namespace,
				ServiceName: echo.name,
				GroupName:   echo.group,
				Module:      "naming",
			},
			ServiceInfo: info,
		}))
	}
	return out
}

// handleStreamPayload handles what a client sends on its stream: the
// connection setup request and the replies to pushes.
func (s *Server) handleStreamPayload(c *conn, p *nacospb.Payload) {
	typ := p.GetMetadata().GetType()
	switch typ {
	case RequestConnectionSetup:
		s.countRequest(typ)
	case typeNotifySubscriberResponse:
		s.stats.add(&s.stats.acks)
	default:
		if strings.HasSuffix(typ, "Request") {
			s.countRequest(typ)
		}
		s.log.Debug("nacostest: ignored stream message", zap.String("peer", c.addr), zap.String("type", typ))
	}
}

func equalHosts(a, b []model.Instance) bool {
	return slices.EqualFunc(a, b, func(x, y model.Instance) bool {
		return x.InstanceId == y.InstanceId && x.Ip == y.Ip && x.Port == y.Port &&
			x.Weight == y.Weight && x.Healthy == y.Healthy && x.Enable == y.Enable &&
			x.ClusterName == y.ClusterName && maps.Equal(x.Metadata, y.Metadata)
	})
}

// pushAfterSubscribeLocked schedules the push Nacos 2.x sends a client
// after it subscribes (ServiceSubscribedEvent, then a push task after
// pushTaskDelay): see [WithSubscribePush]. s.mu must be held.
func (s *Server) pushAfterSubscribeLocked(c *conn, sub subscription) {
	d := s.opts.subscribePush
	switch {
	case d < 0:
		return
	case d == 0:
		c.dirty[sub] = struct{}{}
		c.wakeUp()
		return
	}
	time.AfterFunc(d, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.conns[c.addr] != c {
			return // the connection ended, or the server stopped
		}
		if _, ok := c.subs[sub]; ok {
			c.dirty[sub] = struct{}{}
			c.wakeUp()
		}
	})
}
