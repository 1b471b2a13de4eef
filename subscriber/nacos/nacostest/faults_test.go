package nacostest_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nacos-group/nacos-sdk-go/v2/common/remote/rpc/rpc_request"
	"github.com/nacos-group/nacos-sdk-go/v2/common/remote/rpc/rpc_response"
	"github.com/nacos-group/nacos-sdk-go/v2/vo"

	"github.com/rebound-go/rebound/subscriber/nacos/nacostest"
)

func TestNilOptionIgnored(t *testing.T) {
	srv := newServer(t, nil)
	if !srv.Running() {
		t.Fatal("server not running")
	}
}

// TestRejectionFirstPerConnection: the first N subscribes of every new
// connection are rejected in the handler's own response type, like Nacos'
// TPS control, and change nothing.
func TestRejectionFirstPerConnection(t *testing.T) {
	srv := newServer(t, nacostest.WithoutSubscribePush())
	if err := srv.SetRejection(nacostest.RequestSubscribeService, nacostest.Rejection{FirstPerConnection: 2}); err != nil {
		t.Fatal(err)
	}
	for conn := range 2 {
		rc := dialRaw(t, srv)
		rc.connect(srv)
		for i := range 3 {
			resp := rc.call(nacostest.RequestSubscribeService, subscribeReq("public", "", "svc", "", true))
			sub, ok := resp.(*rpc_response.SubscribeServiceResponse)
			if !ok {
				t.Fatalf("conn %d request %d: reply %T, want the handler's own SubscribeServiceResponse", conn, i, resp)
			}
			wantSubs := conn // the subscriptions held by earlier connections
			if i < 2 {
				if sub.IsSuccess() || sub.GetResultCode() != 500 || sub.GetErrorCode() != nacostest.ErrorCodeOverThreshold ||
					!strings.Contains(sub.GetMessage(), "Tps Flow restricted") || sub.ServiceInfo.LastRefTime != 0 {
					t.Fatalf("conn %d request %d: %+v, want a TPS rejection", conn, i, sub.Response)
				}
			} else {
				if !sub.IsSuccess() || sub.ServiceInfo.Name != "svc" {
					t.Fatalf("conn %d request %d: %+v, want success", conn, i, sub)
				}
				wantSubs++
			}
			if n := srv.SubscriberCount("", "", "svc"); n != wantSubs {
				t.Fatalf("conn %d request %d: SubscriberCount = %d, want %d", conn, i, n, wantSubs)
			}
		}
	}
	st := srv.Stats()
	if st.Rejected[nacostest.RequestSubscribeService] != 4 || st.TotalRejected != 4 {
		t.Errorf("Rejected = %v (total %d), want 4 subscribes", st.Rejected, st.TotalRejected)
	}
	// Other request types are not affected.
	rc := dialRaw(t, srv)
	rc.connect(srv)
	if r, ok := rc.call(nacostest.RequestHealthCheck, rpc_request.NewHealthCheckRequest()).(*rpc_response.HealthCheckResponse); !ok || !r.IsSuccess() {
		t.Fatalf("health check %T %+v", r, r)
	}
	// The zero Rejection removes the fault.
	if err := srv.SetRejection(nacostest.RequestSubscribeService, nacostest.Rejection{}); err != nil {
		t.Fatal(err)
	}
	if r := rc.call(nacostest.RequestSubscribeService, subscribeReq("public", "", "svc", "", true)); !r.IsSuccess() {
		t.Fatalf("after removing the rejection: %+v", r)
	}
}

func TestRejectionFractionAndAuthStyle(t *testing.T) {
	srv := newServer(t)
	rc := dialRaw(t, srv)
	rc.connect(srv)
	if err := srv.SetRejection(nacostest.RequestServiceList, nacostest.Rejection{Fraction: 1, ErrorCode: 403, Message: "no permission"}); err != nil {
		t.Fatal(err)
	}
	resp := rc.call(nacostest.RequestServiceList, rpc_request.NewServiceListRequest("public", "", "DEFAULT_GROUP", 1, 10, ""))
	if _, ok := resp.(*rpc_response.ServiceListResponse); !ok || resp.IsSuccess() || resp.GetErrorCode() != 403 || resp.GetMessage() != "no permission" {
		t.Fatalf("reply %T %+v, want a ServiceListResponse rejected with 403", resp, resp)
	}
	srv.ClearFaults()
	if resp := rc.call(nacostest.RequestServiceList, rpc_request.NewServiceListRequest("public", "", "DEFAULT_GROUP", 1, 10, "")); !resp.IsSuccess() {
		t.Fatalf("after ClearFaults: %+v", resp)
	}
}

// TestRejectionSDKReportsSuccess documents the nacos-sdk-go v2.3.2 behaviour
// the rejection exists for: Subscribe returns nil although the server
// holds no subscription.
func TestRejectionSDKReportsSuccess(t *testing.T) {
	srv := newServer(t)
	client := newClient(t, srv, "")
	if err := srv.SetRejection(nacostest.RequestSubscribeService, nacostest.Rejection{Fraction: 1}); err != nil {
		t.Fatal(err)
	}
	var rec recorder
	if err := client.Subscribe(&vo.SubscribeParam{ServiceName: "svc", SubscribeCallback: rec.callback}); err != nil {
		t.Fatalf("Subscribe = %v; the SDK used to report a TPS rejection as success", err)
	}
	if n := srv.SubscriberCount("", "", "svc"); n != 0 {
		t.Fatalf("SubscriberCount = %d, want 0 (rejected)", n)
	}
	if calls, _ := rec.snapshot(); calls != 0 {
		t.Errorf("callback ran %d times for a rejected subscribe", calls)
	}
}

func TestPushOnSubscribe(t *testing.T) {
	srv := newServer(t)
	rc := dialRaw(t, srv)
	rc.connect(srv)
	resp := rc.call(nacostest.RequestSubscribeService, subscribeReq("public", "", "svc", "", true)).(*rpc_response.SubscribeServiceResponse)
	push := rc.recvPush()
	if push.ServiceInfo.Name != "svc" || push.ServiceInfo.LastRefTime <= resp.ServiceInfo.LastRefTime {
		t.Fatalf("push after subscribe %+v, reply lastRefTime %d", push.ServiceInfo, resp.ServiceInfo.LastRefTime)
	}

	// With a delay, the push comes later; without, not at all.
	delayed := newServer(t, nacostest.WithSubscribePush(50*time.Millisecond))
	rc = dialRaw(t, delayed)
	rc.connect(delayed)
	start := time.Now()
	rc.call(nacostest.RequestSubscribeService, subscribeReq("public", "", "svc", "", true))
	rc.recvPush()
	if d := time.Since(start); d < 50*time.Millisecond {
		t.Errorf("delayed push after %v", d)
	}

	none := newServer(t, nacostest.WithoutSubscribePush())
	rc = dialRaw(t, none)
	rc.connect(none)
	rc.call(nacostest.RequestSubscribeService, subscribeReq("public", "", "svc", "", true))
	if err := none.RegisterInstance("", "", "svc", nacostest.Instance{Ip: "10.0.0.1", Port: 1, Enable: true}); err != nil {
		t.Fatal(err)
	}
	if p := rc.recvPush(); len(p.ServiceInfo.Hosts) != 1 {
		t.Fatalf("first push %+v, want the change (no push on subscribe)", p.ServiceInfo)
	}
	if _, err := nacostest.NewServer(nacostest.WithSubscribePush(-time.Second)); err == nil {
		t.Error("WithSubscribePush(-1s) accepted")
	}
}

func TestForgetSubscribers(t *testing.T) {
	srv := newServer(t, nacostest.WithoutSubscribePush())
	rc := dialRaw(t, srv)
	rc.connect(srv)
	rc.call(nacostest.RequestSubscribeService, subscribeReq("public", "", "svc", "", true))
	rc.call(nacostest.RequestSubscribeService, subscribeReq("public", "", "other", "", true))
	if n := srv.ForgetSubscribers("", "", "svc"); n != 1 {
		t.Fatalf("ForgetSubscribers = %d, want 1", n)
	}
	if n := srv.SubscriberCount("", "", "svc"); n != 0 {
		t.Fatalf("SubscriberCount = %d after forgetting", n)
	}
	// A change of the forgotten service is not pushed; one of the other is.
	for _, svc := range []string{"svc", "other"} {
		if err := srv.RegisterInstance("", "", svc, nacostest.Instance{Ip: "10.0.0.1", Port: 1, Enable: true}); err != nil {
			t.Fatal(err)
		}
	}
	if p := rc.recvPush(); p.ServiceInfo.Name != "other" {
		t.Fatalf("pushed %q, want only other", p.ServiceInfo.Name)
	}
	// The counter moves after Send returns, maybe after the client got it.
	eventually(t, "the push to be counted", func() bool { return srv.Stats().Pushes >= 1 })
	if st := srv.Stats(); st.Pushes != 1 {
		t.Errorf("Pushes = %d, want 1", st.Pushes)
	}
}

func TestLoseNextPush(t *testing.T) {
	srv := newServer(t, nacostest.WithoutSubscribePush())
	rc := dialRaw(t, srv)
	rc.connect(srv)
	rc.call(nacostest.RequestSubscribeService, subscribeReq("public", "", "svc", "", true))
	if n := srv.LoseNextPush("", "", "svc"); n != 1 {
		t.Fatalf("LoseNextPush = %d, want 1", n)
	}
	if err := srv.RegisterInstance("", "", "svc", nacostest.Instance{Ip: "10.0.0.1", Port: 1, Enable: true}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the push to be lost", func() bool { return srv.Stats().PushesLost == 1 })
	if err := srv.RegisterInstance("", "", "svc", nacostest.Instance{Ip: "10.0.0.2", Port: 1, Enable: true}); err != nil {
		t.Fatal(err)
	}
	if p := rc.recvPush(); len(p.ServiceInfo.Hosts) != 2 {
		t.Fatalf("push after the lost one: %+v, want both instances", p.ServiceInfo)
	}
	eventually(t, "the push to be counted", func() bool { return srv.Stats().Pushes >= 1 })
	if st := srv.Stats(); st.Pushes != 1 || st.PushesLost != 1 {
		t.Errorf("Pushes %d, PushesLost %d, want 1 and 1", st.Pushes, st.PushesLost)
	}
}

func TestFaultSettersRejectUnknownTypes(t *testing.T) {
	srv := newServer(t)
	for _, err := range []error{
		srv.SetRequestError("", 500),
		srv.SetRequestError("SubscribeRequest", 500), // misspelt
		srv.SetRequestError(nacostest.RequestSubscribeService, -1),
		srv.SetRejection("FooRequest", nacostest.Rejection{Fraction: 1}),
		srv.SetRejection(nacostest.RequestServerCheck, nacostest.Rejection{Fraction: 1}),
		srv.SetRejection(nacostest.RequestSubscribeService, nacostest.Rejection{Fraction: 1.5}),
		srv.SetRejection(nacostest.RequestSubscribeService, nacostest.Rejection{FirstPerConnection: -1}),
		srv.SetRejection(nacostest.RequestSubscribeService, nacostest.Rejection{Fraction: 1, IP: "10.0.0.1"}), // IP: instance requests only
	} {
		if err == nil {
			t.Error("a bad fault setting was accepted")
		}
	}
	if err := srv.SetRequestError(nacostest.RequestServerCheck, 500); err != nil {
		t.Errorf("SetRequestError(ServerCheck) = %v; it is a known type", err)
	}
}

// PendingPushes: waiting for 0 after a subscribe makes LoseNextPush lose
// the push of the next change, not the push that follows the subscribe.
func TestPendingPushesBeforeLoseNextPush(t *testing.T) {
	srv := newServer(t) // pushes after every subscribe, queued with the reply
	rc := dialRaw(t, srv)
	rc.connect(srv)
	rc.call(nacostest.RequestSubscribeService, subscribeReq("public", "", "svc", "", true))
	eventually(t, "the subscribe push to be taken", func() bool { return srv.PendingPushes() == 0 })
	if p := rc.recvPush(); len(p.ServiceInfo.Hosts) != 0 {
		t.Fatalf("subscribe push %+v, want the empty list", p.ServiceInfo)
	}
	if n := srv.LoseNextPush("", "", "svc"); n != 1 {
		t.Fatalf("LoseNextPush = %d, want 1", n)
	}
	if err := srv.RegisterInstance("", "", "svc", nacostest.Instance{Ip: "10.0.0.1", Port: 1, Enable: true}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the registration's push to be lost", func() bool { return srv.Stats().PushesLost == 1 })
	if err := srv.RegisterInstance("", "", "svc", nacostest.Instance{Ip: "10.0.0.2", Port: 1, Enable: true}); err != nil {
		t.Fatal(err)
	}
	if p := rc.recvPush(); len(p.ServiceInfo.Hosts) != 2 {
		t.Fatalf("push after the lost one: %+v, want both instances", p.ServiceInfo)
	}
	if n := srv.PendingPushes(); n != 0 {
		t.Errorf("PendingPushes = %d after every push was received", n)
	}
}

func TestForgetClientInstances(t *testing.T) {
	srv := newServer(t)
	a, b := newClient(t, srv, ""), newClient(t, srv, "")
	mustRegister(t, a, registerParam("svc", "10.0.0.1", 1))
	mustRegister(t, a, registerParam("other", "10.0.0.1", 2))
	mustRegister(t, b, registerParam("svc", "10.0.0.2", 1))
	conns := srv.ConnectionCount()
	if n := srv.ForgetClientInstances("", "", "svc", "10.0.0.1", 1); n != 2 {
		t.Fatalf("ForgetClientInstances = %d, want 2 (both of the first client's instances)", n)
	}
	if got := addrs(srv.Instances("", "", "svc")); !slices.Equal(got, []string{"10.0.0.2:1"}) {
		t.Fatalf("svc instances = %v, want only the other client's", got)
	}
	if got := srv.Instances("", "", "other"); len(got) != 0 {
		t.Fatalf("other instances = %v, want none", got)
	}
	if n := srv.ConnectionCount(); n != conns {
		t.Fatalf("ConnectionCount = %d, want %d (no connection closed)", n, conns)
	}
	if n := srv.ForgetClientInstances("", "", "svc", "10.9.9.9", 1); n != 0 {
		t.Fatalf("ForgetClientInstances of an unknown instance = %d, want 0", n)
	}
}
