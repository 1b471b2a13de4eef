package nacostest

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"

	nacospb "github.com/nacos-group/nacos-sdk-go/v2/api/grpc"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// faults holds the fault-injection settings. They survive restarts.
type faults struct {
	refuse atomic.Bool
	delay  atomic.Int64 // nanoseconds

	mu      sync.Mutex
	errs    map[string]int       // request type -> errorCode
	errMsg  string               // message of the errors in errs; "" the default
	rejects map[string]Rejection // request type -> rejection
}

// responseTypes maps every request type a fault can apply to onto the
// response type the SDK expects for it (the handler's own response type).
var responseTypes = map[string]string{
	RequestServerCheck:      typeServerCheckResponse,
	RequestHealthCheck:      typeHealthCheckResponse,
	RequestInstance:         typeInstanceResponse,
	RequestBatchInstance:    typeBatchInstanceResponse,
	RequestSubscribeService: typeSubscribeServiceResponse,
	RequestServiceQuery:     typeQueryServiceResponse,
	RequestServiceList:      typeServiceListResponse,
}

func checkRequestType(fn, requestType string) error {
	if requestType == "" {
		return fmt.Errorf("nacostest: %s: requestType is empty", fn)
	}
	if _, ok := responseTypes[requestType]; !ok {
		return fmt.Errorf("nacostest: %s: unknown request type %q (want one of the Request* constants)", fn, requestType)
	}
	return nil
}

// SetRefuseConnections makes the server refuse (true) or accept (false, the
// default) new connections: while refusing, every ServerCheckRequest (the
// first request of a connection attempt) fails with gRPC status
// Unavailable, so nacos-sdk-go's connection attempts fail and it keeps
// retrying. Existing connections are not affected; combine with
// [Server.DropStreams] to push every client into the refused reconnect
// loop, or use [Server.Stop] for a closed port. Safe for concurrent use.
func (s *Server) SetRefuseConnections(refuse bool) {
	s.faults.refuse.Store(refuse)
}

// SetDelay holds back the reply to every unary request (ServerCheck
// included) by d; d <= 0 removes the delay (the default). A delay longer
// than the client's ClientConfig.TimeoutMs makes its requests time out
// (nacos-sdk-go then retries, and may reconnect). A delayed reply is
// abandoned when the client gives up or the server stops. Pushes are not
// delayed. Safe for concurrent use; a change applies to requests received
// afterwards.
func (s *Server) SetDelay(d time.Duration) {
	s.faults.delay.Store(int64(max(d, 0)))
}

// SetRequestError makes the server answer every request of requestType (for
// example [RequestSubscribeService]) with an ErrorResponse carrying
// resultCode 500 and the given errorCode; errorCode 0 removes the fault.
// nacos-sdk-go retries a request answered with an ErrorResponse (three
// attempts within ClientConfig.TimeoutMs) and then returns an error whose
// text is the response message; errorCode [ErrorCodeUnregistered] (301)
// also makes it reconnect. Faults on [RequestServerCheck] are ineffective
// (the SDK ignores that reply's status, except codes 300..399 which make it
// wait a second and retry, for up to 30 s): use
// [Server.SetRefuseConnections]. It returns an error if requestType is
// not one of the Request* constants the server answers (a misspelt type
// would otherwise inject nothing), or errorCode is negative. Safe for
// concurrent use.
func (s *Server) SetRequestError(requestType string, errorCode int) error {
	if err := checkRequestType("SetRequestError", requestType); err != nil {
		return err
	}
	if errorCode < 0 {
		return fmt.Errorf("nacostest: SetRequestError: errorCode %d is negative", errorCode)
	}
	s.faults.mu.Lock()
	defer s.faults.mu.Unlock()
	if errorCode == 0 {
		delete(s.faults.errs, requestType)
	} else {
		s.faults.errs[requestType] = errorCode
	}
	return nil
}

// SetErrorMessage sets the message of the errors SetRequestError injects
// (the SDK returns it as the request's error text); "" restores the
// default, "nacostest: injected error for <type>". Safe for concurrent use.
func (s *Server) SetErrorMessage(msg string) {
	s.faults.mu.Lock()
	s.faults.errMsg = msg
	s.faults.mu.Unlock()
}

// ClearFaults removes every injected fault: refusal, delay, request
// errors (and their SetErrorMessage) and rejections (SetRejection). Forgotten subscribers and pushes
// already lost stay forgotten and lost. Safe for concurrent use.
func (s *Server) ClearFaults() {
	s.faults.refuse.Store(false)
	s.faults.delay.Store(0)
	s.faults.mu.Lock()
	clear(s.faults.errs)
	s.faults.errMsg = ""
	clear(s.faults.rejects)
	s.faults.mu.Unlock()
}

func (s *Server) requestError(requestType string) (code int, msg string, ok bool) {
	s.faults.mu.Lock()
	defer s.faults.mu.Unlock()
	code, ok = s.faults.errs[requestType]
	msg = s.faults.errMsg
	if msg == "" {
		msg = "nacostest: injected error for " + requestType
	}
	return code, msg, ok
}

// DropStreams ends the bi-directional stream of every connection with gRPC
// status Unavailable and returns how many it ended. Like Nacos when a
// connection breaks, the server forgets the connections at once, with their
// ephemeral instances (pushing the change to other subscribers) and their
// subscriptions. nacos-sdk-go clients see their stream fail, open a new
// connection and redo their registrations and subscriptions. Safe for
// concurrent use; it does not wait for the clients.
func (s *Server) DropStreams() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.conns {
		c.dropOnce.Do(func() { close(c.drop) })
	}
	return len(s.conns)
}

// Stats is a snapshot of the server's counters, returned by [Server.Stats].
// Counters accumulate from [NewServer] on, across restarts, until
// [Server.ResetStats].
type Stats struct {
	// Requests counts the requests received by type (the Request*
	// constants, and any unknown type as sent), whatever their outcome:
	// refused, delayed, failed or answered.
	Requests map[string]int64
	// TotalRequests is the sum of Requests.
	TotalRequests int64
	// Pushes counts the NotifySubscriberRequests sent on streams.
	Pushes int64
	// PushAcks counts the NotifySubscriberResponses received.
	PushAcks int64
	// ConnectionsOpened counts the bi-directional streams opened: one per
	// successful client connection or reconnection.
	ConnectionsOpened int64
	// ConnectionsRefused counts the ServerCheckRequests refused by
	// [Server.SetRefuseConnections].
	ConnectionsRefused int64
	// ErrorResponses counts the requests answered with an ErrorResponse:
	// injected by [Server.SetRequestError], from an unregistered
	// connection, malformed or of an unknown type.
	ErrorResponses int64
	// Rejected counts the requests rejected by [Server.SetRejection], by
	// request type (answered with the handler's own response type and
	// success false).
	Rejected map[string]int64
	// TotalRejected is the sum of Rejected.
	TotalRejected int64
	// PushesLost counts the pushes [Server.LoseNextPush] made the server
	// skip.
	PushesLost int64
	// Connections is the number of connections open at the time of the
	// snapshot, like [Server.ConnectionCount].
	Connections int
}

type counters struct {
	mu                                         sync.Mutex
	byType                                     map[string]int64
	rejected                                   map[string]int64
	total, pushes, acks, opened, refused, errs int64
	rejectedTotal, lost                        int64
}

func (c *counters) reject(typ string) {
	c.mu.Lock()
	if c.rejected == nil {
		c.rejected = map[string]int64{}
	}
	c.rejected[typ]++
	c.rejectedTotal++
	c.mu.Unlock()
}

func (c *counters) add(field *int64) {
	c.mu.Lock()
	*field++
	c.mu.Unlock()
}

func (c *counters) request(typ string) {
	c.mu.Lock()
	c.byType[typ]++
	c.total++
	c.mu.Unlock()
}

// Stats returns a snapshot of the counters. Safe for concurrent use; cheap
// enough to poll every few milliseconds.
func (s *Server) Stats() Stats {
	n := s.ConnectionCount()
	c := &s.stats
	c.mu.Lock()
	defer c.mu.Unlock()
	return Stats{
		Requests:           maps.Clone(c.byType),
		TotalRequests:      c.total,
		Pushes:             c.pushes,
		PushAcks:           c.acks,
		ConnectionsOpened:  c.opened,
		ConnectionsRefused: c.refused,
		ErrorResponses:     c.errs,
		Rejected:           maps.Clone(c.rejected),
		TotalRejected:      c.rejectedTotal,
		PushesLost:         c.lost,
		Connections:        n,
	}
}

// ResetStats sets every counter to zero. Safe for concurrent use.
func (s *Server) ResetStats() {
	c := &s.stats
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.byType)
	clear(c.rejected)
	c.total, c.pushes, c.acks, c.opened, c.refused, c.errs = 0, 0, 0, 0, 0, 0
	c.rejectedTotal, c.lost = 0, 0
}

// Rejection describes how the server rejects requests of one type the way
// Nacos 2.x's TPS control (TpsControlRequestFilter) and its auth filter do:
// with the handler's own response type (for a subscribe, a
// SubscribeServiceResponse) carrying resultCode 500, success false and
// ErrorCode, not with an ErrorResponse. A rejected request changes no
// state. nacos-sdk-go v2.3.2 only logs such a reply and returns it with a nil
// error: NamingClient.Subscribe returns nil although the server holds no
// subscription, and the SDK's redo after a reconnect counts the key as done.
//
// A request is rejected if it is among the first FirstPerConnection requests
// of its type on its connection, or else with probability Fraction.
type Rejection struct {
	// FirstPerConnection rejects the first N requests of the type on every
	// new connection (each reconnect starts a new count): a reconnect storm
	// that trips TPS control. 0: none.
	FirstPerConnection int
	// Fraction rejects this share of the other requests, drawn at random
	// for each request: 0 none, 1 all.
	Fraction float64
	// ErrorCode is the response's errorCode. 0 means
	// [ErrorCodeOverThreshold] (503, TPS control); auth uses 403.
	ErrorCode int
	// Message is the response's message. Empty means "Tps Flow
	// restricted:nacostest".
	Message string
	// IP, if set, limits the rejection to InstanceRequests whose
	// instance has this Ip (one provider's requests, not a client's
	// redo of another's); other requests are neither rejected nor
	// counted.
	IP string
}

// ErrorCodeOverThreshold is the errorCode of Nacos' TPS control rejection
// (Java's OVER_THRESHOLD).
const ErrorCodeOverThreshold = 503

// SetRejection makes the server reject requests of requestType as r says
// (see [Rejection]); the zero Rejection removes the fault. Connections
// opened before the call start counting from the call. It returns an error
// for a request type other than the Request* constants the server answers,
// for [RequestServerCheck] (the SDK ignores that reply's status: use
// [Server.SetRefuseConnections]), for a negative FirstPerConnection or
// ErrorCode, or a Fraction outside [0, 1]. Safe for concurrent use.
func (s *Server) SetRejection(requestType string, r Rejection) error {
	if err := checkRequestType("SetRejection", requestType); err != nil {
		return err
	}
	switch {
	case requestType == RequestServerCheck:
		return fmt.Errorf("nacostest: SetRejection: %s replies are not checked by the SDK; use SetRefuseConnections", requestType)
	case r.FirstPerConnection < 0:
		return fmt.Errorf("nacostest: SetRejection: FirstPerConnection %d is negative", r.FirstPerConnection)
	case !(r.Fraction >= 0 && r.Fraction <= 1):
		return fmt.Errorf("nacostest: SetRejection: Fraction %v is outside [0, 1]", r.Fraction)
	case r.ErrorCode < 0:
		return fmt.Errorf("nacostest: SetRejection: ErrorCode %d is negative", r.ErrorCode)
	case r.IP != "" && requestType != RequestInstance:
		return fmt.Errorf("nacostest: SetRejection: IP is for %s only; got %s", RequestInstance, requestType)
	}
	if r.ErrorCode == 0 {
		r.ErrorCode = ErrorCodeOverThreshold
	}
	if r.Message == "" {
		r.Message = "Tps Flow restricted:nacostest"
	}
	s.faults.mu.Lock()
	defer s.faults.mu.Unlock()
	if r.FirstPerConnection == 0 && r.Fraction == 0 {
		delete(s.faults.rejects, requestType)
	} else {
		s.faults.rejects[requestType] = r
	}
	// Restart the per-connection counts of this type.
	s.mu.Lock()
	for _, c := range s.conns {
		delete(c.seen, requestType)
	}
	s.mu.Unlock()
	return nil
}

// rejection decides whether a request of typ on c is rejected, and returns
// the reply if so. c may be nil (no stream yet): it then only draws the
// fraction.
func (s *Server) rejection(c *conn, typ, requestID string, body []byte) *nacospb.Payload {
	s.faults.mu.Lock()
	r, ok := s.faults.rejects[typ]
	s.faults.mu.Unlock()
	if !ok {
		return nil
	}
	if r.IP != "" {
		var req instanceRequest
		if typ != RequestInstance || json.Unmarshal(body, &req) != nil || req.Instance.Ip != r.IP {
			return nil
		}
	}
	reject := false
	if c != nil {
		s.mu.Lock()
		c.seen[typ]++
		reject = c.seen[typ] <= r.FirstPerConnection
		s.mu.Unlock()
	}
	if !reject && r.Fraction > 0 {
		reject = r.Fraction >= 1 || rand.Float64() < r.Fraction
	}
	if !reject {
		return nil
	}
	s.stats.reject(typ)
	return encode(responseTypes[typ], response{
		ResultCode: codeFail,
		ErrorCode:  r.ErrorCode,
		Success:    false,
		Message:    r.Message,
		RequestID:  requestID,
	})
}

// ForgetSubscribers makes the server drop every connection's subscription
// to service (in the namespace and group; empty means the defaults) without
// telling the clients, as a server that lost its state for one service
// would: the clients keep believing they are subscribed and receive no
// further pushes for it. It returns how many subscriptions it dropped. Safe
// for concurrent use.
func (s *Server) ForgetSubscribers(namespace, group, service string) int {
	k := makeSvcKey(namespace, group, service)
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.conns {
		for sub := range c.subs {
			if sub.svc == k {
				delete(c.subs, sub)
				delete(c.dirty, sub)
				n++
			}
		}
	}
	return n
}

// LoseNextPush makes the server lose the next push of service (in the
// namespace and group; empty means the defaults) to every connection
// subscribed to it now: that push is counted in [Stats.PushesLost] but not
// sent, so those clients keep their old list until a later push. It returns
// how many connections will lose a push. A push already queued (see
// [Server.PendingPushes]: the push that follows a subscribe is queued with
// its reply) is the next one. Safe for concurrent use.
func (s *Server) LoseNextPush(namespace, group, service string) int {
	k := makeSvcKey(namespace, group, service)
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.conns {
		for sub := range c.subs {
			if sub.svc == k {
				c.lose[k]++
				n++
				break
			}
		}
	}
	return n
}

// ForgetClientInstances makes the server forget every ephemeral instance
// of the client connection (or connections) that registered the instance
// ip:port of service (in the namespace and group; empty means the
// defaults), in every service, without closing the connection or telling
// the client, as a Nacos node whose Distro sync lost a client's data
// would: subscribers are pushed the lists without them, and the client
// keeps believing they are registered (its next reconnect's redo would
// bring them back). It returns how many instances it forgot. Safe for
// concurrent use.
func (s *Server) ForgetClientInstances(namespace, group, service, ip string, port uint64) int {
	k := makeSvcKey(namespace, group, service)
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.conns {
		holds := slices.ContainsFunc(c.published[k], func(p published) bool {
			return p.inst.Ip == ip && p.inst.Port == port
		})
		if !holds {
			continue
		}
		for sk, ps := range c.published {
			n += len(ps)
			s.mutateLocked(sk, func() { delete(c.published, sk) })
		}
	}
	return n
}
