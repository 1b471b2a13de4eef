package nacostest

import (
	"encoding/json"
	"sync/atomic"
	"time"

	nacospb "github.com/nacos-group/nacos-sdk-go/v2/api/grpc"
	"github.com/nacos-group/nacos-sdk-go/v2/model"
	"google.golang.org/protobuf/types/known/anypb"
)

// Request types (the Java simple class names carried in Payload.metadata.type)
// that the server understands. They are the keys of [Stats.Requests] and the
// values passed to the hook installed by [WithRequestHook].
const (
	// RequestServerCheck opens every connection (unary). Its reply carries
	// the connection id. [Server.SetRefuseConnections] rejects it.
	RequestServerCheck = "ServerCheckRequest"
	// RequestConnectionSetup is the first message the client sends on the
	// bi-directional stream. It has no reply.
	RequestConnectionSetup = "ConnectionSetupRequest"
	// RequestHealthCheck is the client's keep-alive probe (unary).
	RequestHealthCheck = "HealthCheckRequest"
	// RequestInstance registers or deregisters the connection's ephemeral
	// instance of a service (unary).
	RequestInstance = "InstanceRequest"
	// RequestBatchInstance registers several ephemeral instances of a
	// service at once (unary).
	RequestBatchInstance = "BatchInstanceRequest"
	// RequestSubscribeService subscribes to or unsubscribes from a service
	// (unary). Its reply carries the current service info.
	RequestSubscribeService = "SubscribeServiceRequest"
	// RequestServiceQuery queries a service's instances without subscribing
	// (unary; the SDK only sends it with ClientConfig.AsyncUpdateService).
	RequestServiceQuery = "ServiceQueryRequest"
	// RequestServiceList lists the services of a namespace and group (unary).
	RequestServiceList = "ServiceListRequest"
)

// Types the server sends.
const (
	typeNotifySubscriber         = "NotifySubscriberRequest"
	typeNotifySubscriberResponse = "NotifySubscriberResponse"
	typeServerCheckResponse      = "ServerCheckResponse"
	typeHealthCheckResponse      = "HealthCheckResponse"
	typeInstanceResponse         = "InstanceResponse"
	typeBatchInstanceResponse    = "BatchInstanceResponse"
	typeSubscribeServiceResponse = "SubscribeServiceResponse"
	typeQueryServiceResponse     = "QueryServiceResponse"
	typeServiceListResponse      = "ServiceListResponse"
	typeErrorResponse            = "ErrorResponse"
)

// Nacos result and error codes used on the wire.
const (
	codeSuccess      = 200
	codeFail         = 500
	codeInvalidParam = 400
)

// ErrorCodeUnregistered is the errorCode Nacos answers a request with when
// the request's connection has no open bi-directional stream (Java's
// UN_REGISTER). nacos-sdk-go reacts to it by opening a new connection.
const ErrorCodeUnregistered = 301

// DefaultCluster is the cluster name given to an instance registered with an
// empty cluster name, as Nacos does.
const DefaultCluster = "DEFAULT"

// DefaultNamespace and DefaultGroup replace an empty namespace or group, as
// nacos-sdk-go and the Nacos server do.
const (
	DefaultNamespace = "public"
	DefaultGroup     = "DEFAULT_GROUP"
)

// response is the common part of every reply (Java's Response).
type response struct {
	ResultCode int    `json:"resultCode"`
	ErrorCode  int    `json:"errorCode"`
	Success    bool   `json:"success"`
	Message    string `json:"message"`
	RequestID  string `json:"requestId"`
}

func okResponse(requestID string) response {
	return response{ResultCode: codeSuccess, Success: true, Message: "success", RequestID: requestID}
}

type serverCheckResponse struct {
	response
	ConnectionID string `json:"connectionId"`
}

type instanceResponse struct {
	response
	Type string `json:"type"`
}

// serviceInfoResponse is SubscribeServiceResponse and QueryServiceResponse.
type serviceInfoResponse struct {
	response
	ServiceInfo model.Service `json:"serviceInfo"`
}

type serviceListResponse struct {
	response
	Count        int      `json:"count"`
	ServiceNames []string `json:"serviceNames"`
}

// namingRequest is the common part of every naming request. RequestID must
// be present in pushes: the SDK decodes a push into a struct whose embedded
// *Request is only allocated when a field of it is present, and it panics on
// a nil *Request.
type namingRequest struct {
	RequestID   string `json:"requestId"`
	Namespace   string `json:"namespace"`
	ServiceName string `json:"serviceName"`
	GroupName   string `json:"groupName"`
	Module      string `json:"module"`
}

type instanceRequest struct {
	namingRequest
	Type     string         `json:"type"`
	Instance model.Instance `json:"instance"`
}

type batchInstanceRequest struct {
	namingRequest
	Type      string           `json:"type"`
	Instances []model.Instance `json:"instances"`
}

type subscribeServiceRequest struct {
	namingRequest
	Subscribe bool   `json:"subscribe"`
	Clusters  string `json:"clusters"`
}

type serviceQueryRequest struct {
	namingRequest
	Cluster     string `json:"cluster"`
	HealthyOnly bool   `json:"healthyOnly"`
	UDPPort     int    `json:"udpPort"`
}

type serviceListRequest struct {
	namingRequest
	PageNo   int    `json:"pageNo"`
	PageSize int    `json:"pageSize"`
	Selector string `json:"selector"`
}

type notifySubscriberRequest struct {
	namingRequest
	ServiceInfo model.Service `json:"serviceInfo"`
}

// encode builds a payload: metadata.type plus an Any whose Value is JSON and
// whose TypeUrl is empty, the framing nacos-sdk-go expects.
func encode(typ string, v any) *nacospb.Payload {
	b, err := json.Marshal(v)
	if err != nil {
		// Every value encoded here is a plain struct of strings, numbers,
		// bools, slices and string maps: Marshal cannot fail.
		panic("nacostest: encoding " + typ + ": " + err.Error())
	}
	return &nacospb.Payload{
		Metadata: &nacospb.Metadata{Type: typ},
		Body:     &anypb.Any{Value: b},
	}
}

func errorPayload(requestID string, errorCode int, msg string) *nacospb.Payload {
	return encode(typeErrorResponse, response{
		ResultCode: codeFail,
		ErrorCode:  errorCode,
		Success:    false,
		Message:    msg,
		RequestID:  requestID,
	})
}

// lastRefTime is process-wide so that service infos built by any Server in
// this process, before or after a restart, carry strictly increasing
// lastRefTime values: the SDK drops a push whose lastRefTime is not greater
// than the one it has cached.
var lastRefTime atomic.Int64

// nextRefTime returns max(now in ms, previous+1).
func nextRefTime() int64 {
	for {
		prev := lastRefTime.Load()
		next := max(time.Now().UnixMilli(), prev+1)
		if lastRefTime.CompareAndSwap(prev, next) {
			return next
		}
	}
}
