package nacostest_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	nacospb "github.com/nacos-group/nacos-sdk-go/v2/api/grpc"
	"github.com/nacos-group/nacos-sdk-go/v2/common/remote/rpc/rpc_request"
	"github.com/nacos-group/nacos-sdk-go/v2/common/remote/rpc/rpc_response"
	"github.com/nacos-group/nacos-sdk-go/v2/model"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/rebound-go/rebound/subscriber/nacos/nacostest"
)

// rawClient speaks the wire protocol directly, through the SDK's generated
// stubs, to check what the SDK relies on field by field.
type rawClient struct {
	t      *testing.T
	conn   *grpc.ClientConn
	req    nacospb.RequestClient
	stream nacospb.BiRequestStream_RequestBiStreamClient
	cancel context.CancelFunc
}

func dialRaw(t *testing.T, srv *nacostest.Server) *rawClient {
	t.Helper()
	conn, err := grpc.NewClient("passthrough:///"+srv.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	rc := &rawClient{t: t, conn: conn, req: nacospb.NewRequestClient(conn)}
	t.Cleanup(rc.close)
	return rc
}

func (rc *rawClient) close() {
	if rc.cancel != nil {
		rc.cancel()
	}
	_ = rc.conn.Close()
}

func payload(typ string, body any) *nacospb.Payload {
	b, err := json.Marshal(body)
	if err != nil {
		panic(err)
	}
	return &nacospb.Payload{Metadata: &nacospb.Metadata{Type: typ}, Body: &anypb.Any{Value: b}}
}

// call sends a unary request and decodes the reply the way the SDK does:
// by metadata.type through rpc_response.ClientResponseMapping.
func (rc *rawClient) call(typ string, body any) rpc_response.IResponse {
	rc.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	p, err := rc.req.Request(ctx, payload(typ, body))
	if err != nil {
		rc.t.Fatalf("%s: %v", typ, err)
	}
	newResp, ok := rpc_response.ClientResponseMapping[p.GetMetadata().GetType()]
	if !ok {
		rc.t.Fatalf("%s: reply type %q is unknown to the SDK", typ, p.GetMetadata().GetType())
	}
	resp, err := rpc_response.InnerResponseJsonUnmarshal(p.GetBody().GetValue(), newResp)
	if err != nil {
		rc.t.Fatalf("%s: decoding %s: %v", typ, p.GetBody().GetValue(), err)
	}
	return resp
}

// connect performs the SDK's handshake: ServerCheck, then the stream with a
// ConnectionSetupRequest.
func (rc *rawClient) connect(srv *nacostest.Server) string {
	rc.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	p, err := rc.req.Request(ctx, payload(nacostest.RequestServerCheck, rpc_request.NewServerCheckRequest()))
	if err != nil {
		rc.t.Fatalf("ServerCheck: %v", err)
	}
	var check rpc_response.ServerCheckResponse
	if p.GetMetadata().GetType() != "ServerCheckResponse" {
		rc.t.Fatalf("ServerCheck reply type %q", p.GetMetadata().GetType())
	}
	if err := json.Unmarshal(p.GetBody().GetValue(), &check); err != nil || check.ConnectionId == "" || check.ResultCode != 200 {
		rc.t.Fatalf("ServerCheck reply %s: %v", p.GetBody().GetValue(), err)
	}
	before := srv.Stats().ConnectionsOpened
	sctx, scancel := context.WithCancel(context.Background())
	rc.cancel = scancel
	rc.stream, err = nacospb.NewBiRequestStreamClient(rc.conn).RequestBiStream(sctx)
	if err != nil {
		rc.t.Fatal(err)
	}
	if err := rc.stream.Send(payload(nacostest.RequestConnectionSetup, rpc_request.NewConnectionSetupRequest())); err != nil {
		rc.t.Fatal(err)
	}
	eventually(rc.t, "the stream to register", func() bool { return srv.Stats().ConnectionsOpened > before })
	return check.ConnectionId
}

// recvPush reads a push and decodes it exactly as the SDK's stream loop
// does: into a NotifySubscriberRequest with a zero NamingRequest, then
// PutAllHeaders and GetRequestId, which panic on a nil *Request.
func (rc *rawClient) recvPush() *rpc_request.NotifySubscriberRequest {
	rc.t.Helper()
	p, err := rc.stream.Recv()
	if err != nil {
		rc.t.Fatalf("Recv: %v", err)
	}
	if typ := p.GetMetadata().GetType(); typ != "NotifySubscriberRequest" {
		rc.t.Fatalf("pushed type %q", typ)
	}
	req := &rpc_request.NotifySubscriberRequest{NamingRequest: &rpc_request.NamingRequest{}}
	if err := json.Unmarshal(p.GetBody().GetValue(), req); err != nil {
		rc.t.Fatalf("decoding push %s: %v", p.GetBody().GetValue(), err)
	}
	req.PutAllHeaders(p.GetMetadata().GetHeaders())
	if req.GetRequestId() == "" {
		rc.t.Fatalf("push without requestId: %s", p.GetBody().GetValue())
	}
	return req
}

func subscribeReq(ns, group, svc, clusters string, sub bool) *rpc_request.SubscribeServiceRequest {
	return rpc_request.NewSubscribeServiceRequest(ns, svc, group, clusters, sub)
}

func TestWireProtocol(t *testing.T) {
	srv := newServer(t)
	rc := dialRaw(t, srv)

	// Before its stream is open a connection is unregistered.
	resp := rc.call(nacostest.RequestHealthCheck, rpc_request.NewHealthCheckRequest())
	if _, ok := resp.(*rpc_response.ErrorResponse); !ok || resp.GetErrorCode() != nacostest.ErrorCodeUnregistered {
		t.Fatalf("request before the stream: %T %+v, want ErrorResponse 301", resp, resp)
	}

	rc.connect(srv)
	if _, ok := rc.call(nacostest.RequestHealthCheck, rpc_request.NewHealthCheckRequest()).(*rpc_response.HealthCheckResponse); !ok {
		t.Fatal("HealthCheck reply is not a HealthCheckResponse")
	}

	// Subscribe: the reply echoes name, group and clusters.
	resp = rc.call(nacostest.RequestSubscribeService, subscribeReq("public", "G", "svc", "a,b", true))
	sub, ok := resp.(*rpc_response.SubscribeServiceResponse)
	if !ok || !sub.IsSuccess() {
		t.Fatalf("Subscribe reply %T %+v", resp, resp)
	}
	info := sub.ServiceInfo
	if info.Name != "svc" || info.GroupName != "G" || info.Clusters != "a,b" || info.Hosts == nil || len(info.Hosts) != 0 ||
		!info.Valid || info.CacheMillis != 10000 || info.LastRefTime == 0 {
		t.Fatalf("serviceInfo = %+v", info)
	}
	lastRef := info.LastRefTime

	// A change is pushed, with a greater lastRefTime, filtered by cluster.
	for _, in := range []nacostest.Instance{
		{Ip: "10.0.0.1", Port: 1, ClusterName: "a", Enable: true, Healthy: true},
		{Ip: "10.0.0.2", Port: 1, ClusterName: "z", Enable: true},
	} {
		if err := srv.RegisterInstance("", "G", "svc", in); err != nil {
			t.Fatal(err)
		}
	}
	var push *rpc_request.NotifySubscriberRequest
	for push == nil || len(push.ServiceInfo.Hosts) == 0 {
		push = rc.recvPush()
		if push.ServiceInfo.LastRefTime <= lastRef {
			t.Fatalf("push lastRefTime %d not above %d", push.ServiceInfo.LastRefTime, lastRef)
		}
		lastRef = push.ServiceInfo.LastRefTime
	}
	pi := push.ServiceInfo
	if pi.Name != "svc" || pi.GroupName != "G" || pi.Clusters != "a,b" || len(pi.Hosts) != 1 || pi.Hosts[0].Ip != "10.0.0.1" ||
		pi.Hosts[0].ServiceName != "G@@svc" || pi.Hosts[0].InstanceId == "" || pi.Checksum == "" {
		t.Fatalf("pushed serviceInfo = %+v", pi)
	}
	ack := &rpc_response.NotifySubscriberResponse{Response: &rpc_response.Response{ResultCode: 200, Success: true, RequestId: push.RequestId}}
	if err := rc.stream.Send(&nacospb.Payload{Metadata: &nacospb.Metadata{Type: ack.GetResponseType()}, Body: &anypb.Any{Value: []byte(ack.GetBody())}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the ack to be counted", func() bool { return srv.Stats().PushAcks >= 1 })

	// Query: healthyOnly filters, cluster filters.
	resp = rc.call(nacostest.RequestServiceQuery, rpc_request.NewServiceQueryRequest("public", "svc", "G", "", true, 0))
	q, ok := resp.(*rpc_response.QueryServiceResponse)
	if !ok || len(q.ServiceInfo.Hosts) != 1 || q.ServiceInfo.Hosts[0].Ip != "10.0.0.1" {
		t.Fatalf("healthy-only query = %T %+v", resp, resp)
	}
	resp = rc.call(nacostest.RequestServiceQuery, rpc_request.NewServiceQueryRequest("public", "svc", "G", "z", false, 0))
	if q, ok := resp.(*rpc_response.QueryServiceResponse); !ok || len(q.ServiceInfo.Hosts) != 1 || q.ServiceInfo.Hosts[0].Ip != "10.0.0.2" {
		t.Fatalf("cluster z query = %T %+v", resp, resp)
	}

	// Instance registration through the wire.
	reg := rpc_request.NewInstanceRequest("public", "svc2", "G", "registerInstance", model.Instance{Ip: "10.0.0.3", Port: 3, Enable: true})
	if r, ok := rc.call(nacostest.RequestInstance, reg).(*rpc_response.InstanceResponse); !ok || !r.IsSuccess() {
		t.Fatalf("register reply %T %+v", r, r)
	}
	if got := srv.Instances("", "G", "svc2"); len(got) != 1 {
		t.Fatalf("instances = %+v", got)
	}

	// Errors, never a crash.
	for _, tc := range []struct {
		typ  string
		body any
		code int
	}{
		{"FooRequest", map[string]string{"x": "y"}, 500},
		{nacostest.RequestInstance, rpc_request.NewInstanceRequest("public", "svc2", "G", "frobnicate", model.Instance{Ip: "10.0.0.3"}), 400},
		{nacostest.RequestInstance, rpc_request.NewInstanceRequest("public", "", "G", "registerInstance", model.Instance{Ip: "10.0.0.3"}), 400},
		{nacostest.RequestSubscribeService, subscribeReq("public", "G", "", "", true), 400},
		{nacostest.RequestBatchInstance, rpc_request.NewBatchInstanceRequest("public", "svc2", "G", "nope", nil), 400},
		{nacostest.RequestInstance, "not an object", 400},
	} {
		resp := rc.call(tc.typ, tc.body)
		if _, ok := resp.(*rpc_response.ErrorResponse); !ok || resp.IsSuccess() || resp.GetErrorCode() != tc.code || resp.GetMessage() == "" {
			t.Errorf("%s %v: reply %T %+v, want ErrorResponse %d", tc.typ, tc.body, resp, resp, tc.code)
		}
	}

	// Unsubscribe: no more pushes for that subscription.
	rc.call(nacostest.RequestSubscribeService, subscribeReq("public", "G", "svc", "a,b", false))
	if n := srv.SubscriberCount("", "G", "svc"); n != 0 {
		t.Fatalf("SubscriberCount after unsubscribe = %d", n)
	}
}

func TestInjectedErrorAndRefusal(t *testing.T) {
	srv := newServer(t)
	rc := dialRaw(t, srv)
	rc.connect(srv)
	if err := srv.SetRequestError(nacostest.RequestServiceList, 503); err != nil {
		t.Fatal(err)
	}
	resp := rc.call(nacostest.RequestServiceList, rpc_request.NewServiceListRequest("public", "", "DEFAULT_GROUP", 1, 10, ""))
	if _, ok := resp.(*rpc_response.ErrorResponse); !ok || resp.GetErrorCode() != 503 || resp.GetResultCode() != 500 {
		t.Fatalf("reply %T %+v, want ErrorResponse 503", resp, resp)
	}
	if err := srv.SetRequestError(nacostest.RequestServiceList, 0); err != nil {
		t.Fatal(err)
	}
	if _, ok := rc.call(nacostest.RequestServiceList, rpc_request.NewServiceListRequest("public", "", "DEFAULT_GROUP", 1, 10, "")).(*rpc_response.ServiceListResponse); !ok {
		t.Fatal("fault not removed")
	}

	srv.SetRefuseConnections(true)
	_, err := rc.req.Request(context.Background(), payload(nacostest.RequestServerCheck, rpc_request.NewServerCheckRequest()))
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("ServerCheck while refusing: %v, want Unavailable", err)
	}
	// The existing connection still works.
	if _, ok := rc.call(nacostest.RequestHealthCheck, rpc_request.NewHealthCheckRequest()).(*rpc_response.HealthCheckResponse); !ok {
		t.Fatal("existing connection affected by refusal")
	}
	srv.ClearFaults()
	if _, err := rc.req.Request(context.Background(), payload(nacostest.RequestServerCheck, rpc_request.NewServerCheckRequest())); err != nil {
		t.Fatalf("ServerCheck after ClearFaults: %v", err)
	}
}

func TestDropStreamsRaw(t *testing.T) {
	srv := newServer(t)
	rc := dialRaw(t, srv)
	rc.connect(srv)
	reg := rpc_request.NewInstanceRequest("public", "svc", "DEFAULT_GROUP", "registerInstance", model.Instance{Ip: "10.0.0.1", Port: 1, Enable: true})
	rc.call(nacostest.RequestInstance, reg)

	if n := srv.DropStreams(); n != 1 {
		t.Fatalf("DropStreams = %d", n)
	}
	_, err := rc.stream.Recv()
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("Recv after DropStreams: %v, want Unavailable", err)
	}
	eventually(t, "the connection and its instance to go", func() bool {
		return srv.ConnectionCount() == 0 && len(srv.Instances("", "", "svc")) == 0
	})
	// The old connection is now unregistered.
	if resp := rc.call(nacostest.RequestHealthCheck, rpc_request.NewHealthCheckRequest()); resp.GetErrorCode() != nacostest.ErrorCodeUnregistered {
		t.Fatalf("request after the drop: %+v, want 301", resp)
	}
}

// TestLastRefTimeAcrossRestart: service infos after a restart carry greater
// lastRefTime values than before it, so the SDK's cache accepts them.
func TestLastRefTimeAcrossRestart(t *testing.T) {
	srv := newServer(t)
	rc := dialRaw(t, srv)
	rc.connect(srv)
	first := rc.call(nacostest.RequestSubscribeService, subscribeReq("public", "DEFAULT_GROUP", "svc", "", true)).(*rpc_response.SubscribeServiceResponse)

	srv.Stop()
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	rc2 := dialRaw(t, srv)
	rc2.connect(srv)
	second := rc2.call(nacostest.RequestSubscribeService, subscribeReq("public", "DEFAULT_GROUP", "svc", "", true)).(*rpc_response.SubscribeServiceResponse)
	if second.ServiceInfo.LastRefTime <= first.ServiceInfo.LastRefTime {
		t.Fatalf("lastRefTime went from %d to %d across a restart", first.ServiceInfo.LastRefTime, second.ServiceInfo.LastRefTime)
	}
}

// TestServerLeaksNothing: after Close, no goroutine of the server is left,
// even with a stream open, a push pending and a reply held back by a delay.
func TestServerLeaksNothing(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())

	srv, err := nacostest.NewServer()
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient("passthrough:///"+srv.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rc := &rawClient{t: t, conn: conn, req: nacospb.NewRequestClient(conn)}
	rc.connect(srv)
	defer rc.cancel()
	rc.call(nacostest.RequestSubscribeService, subscribeReq("public", "DEFAULT_GROUP", "svc", "", true))
	if err := srv.RegisterInstance("", "", "svc", nacostest.Instance{Ip: "10.0.0.1", Port: 1, Enable: true}); err != nil {
		t.Fatal(err)
	}

	srv.SetDelay(time.Hour)
	held := make(chan error, 1)
	go func() {
		_, err := rc.req.Request(context.Background(), payload(nacostest.RequestHealthCheck, rpc_request.NewHealthCheckRequest()))
		held <- err
	}()
	eventually(t, "the delayed request to arrive", func() bool {
		return srv.Stats().Requests[nacostest.RequestHealthCheck] == 1
	})

	closed := make(chan struct{})
	go func() {
		srv.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(waitTimeout):
		t.Fatal("Close blocked on a delayed reply")
	}
	if err := <-held; status.Code(err) != codes.Unavailable && !errors.Is(err, context.Canceled) {
		t.Errorf("delayed request ended with %v, want Unavailable", err)
	}
	rc.cancel()
	_ = conn.Close()
}

// TestSecondStreamReplacesFirst: a connection is its stream; a second stream
// on the same connection replaces the first, whose instances go (and the
// change is pushed).
func TestSecondStreamReplacesFirst(t *testing.T) {
	srv := newServer(t, nacostest.WithoutSubscribePush())
	watcher := dialRaw(t, srv)
	watcher.connect(srv)
	watcher.call(nacostest.RequestSubscribeService, subscribeReq("public", "DEFAULT_GROUP", "svc", "", true))

	rc := dialRaw(t, srv)
	rc.connect(srv)
	reg := rpc_request.NewInstanceRequest("public", "svc", "DEFAULT_GROUP", "registerInstance", model.Instance{Ip: "10.0.0.1", Port: 1, Enable: true})
	rc.call(nacostest.RequestInstance, reg)
	if push := watcher.recvPush(); len(push.ServiceInfo.Hosts) != 1 {
		t.Fatalf("push after registration: %+v", push.ServiceInfo)
	}

	first := rc.stream
	rc.connect(srv) // a second stream on the same gRPC connection
	if _, err := first.Recv(); status.Code(err) != codes.Unavailable {
		t.Fatalf("first stream: %v, want Unavailable", err)
	}
	if push := watcher.recvPush(); len(push.ServiceInfo.Hosts) != 0 {
		t.Fatalf("push after replacement: %+v, want no instance", push.ServiceInfo)
	}
	if n := srv.ConnectionCount(); n != 2 {
		t.Fatalf("ConnectionCount = %d, want 2", n)
	}
}

// TestPublicationSemantics: like Nacos 2.x, a connection publishes one
// instance per service through InstanceRequest (a registration replaces the
// previous one; a deregistration removes it whatever it names), and a batch
// replaces the connection's instances of the service.
func TestPublicationSemantics(t *testing.T) {
	srv := newServer(t)
	rc := dialRaw(t, srv)
	rc.connect(srv)
	const ns, group, svc = "public", "DEFAULT_GROUP", "svc"
	instance := func(typ string, port uint64) *rpc_request.InstanceRequest {
		return rpc_request.NewInstanceRequest(ns, svc, group, typ, model.Instance{Ip: "10.0.0.1", Port: port, Enable: true})
	}
	batch := func(typ string, ports ...uint64) *rpc_request.BatchInstanceRequest {
		var ins []model.Instance
		for _, p := range ports {
			ins = append(ins, model.Instance{Ip: "10.0.0.1", Port: p, Enable: true})
		}
		return rpc_request.NewBatchInstanceRequest(ns, svc, group, typ, ins)
	}
	ports := func() []uint64 {
		var out []uint64
		for _, in := range srv.Instances("", "", svc) {
			out = append(out, in.Port)
		}
		return out
	}
	check := func(step string, want ...uint64) {
		t.Helper()
		if got := ports(); !slices.Equal(got, want) {
			t.Fatalf("after %s: ports %v, want %v", step, got, want)
		}
	}

	rc.call(nacostest.RequestInstance, instance("registerInstance", 1))
	rc.call(nacostest.RequestInstance, instance("registerInstance", 2))
	check("two registrations", 2)
	rc.call(nacostest.RequestInstance, instance("deregisterInstance", 7))
	check("a deregistration naming another port")

	if r, ok := rc.call(nacostest.RequestBatchInstance, batch("batchRegisterInstance", 1, 2, 3)).(*rpc_response.BatchInstanceResponse); !ok || !r.IsSuccess() {
		t.Fatalf("batch reply %T %+v", r, r)
	}
	check("a batch", 1, 2, 3)
	rc.call(nacostest.RequestBatchInstance, batch("batchDeregisterInstance", 2))
	check("a batch deregistration", 1, 3)
	rc.call(nacostest.RequestInstance, instance("registerInstance", 4))
	check("a single registration after a batch", 4)

	// The server's own registrations are separate and keyed by
	// ip:port:cluster; the same address from two publishers appears once.
	if err := srv.RegisterInstance("", "", svc, nacostest.Instance{Ip: "10.0.0.1", Port: 4, Enable: true, Weight: 3}); err != nil {
		t.Fatal(err)
	}
	if err := srv.RegisterInstance("", "", svc, nacostest.Instance{Ip: "10.0.0.1", Port: 5, Enable: true}); err != nil {
		t.Fatal(err)
	}
	check("server registrations", 4, 5)
	if got := srv.Instances("", "", svc); got[0].Weight != 3 {
		t.Errorf("the latest publication of 10.0.0.1:4 should win: %+v", got[0])
	}
}
