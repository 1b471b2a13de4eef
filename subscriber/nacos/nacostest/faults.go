package nacostest

import (
	"errors"
	"maps"
	"sync"
	"sync/atomic"
	"time"
)

// faults holds the fault-injection settings. They survive restarts.
type faults struct {
	refuse atomic.Bool
	delay  atomic.Int64 // nanoseconds

	mu   sync.Mutex
	errs map[string]int // request type -> errorCode
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
// empty. Safe for concurrent use.
func (s *Server) SetRequestError(requestType string, errorCode int) error {
	if requestType == "" {
		return errors.New("nacostest: SetRequestError: requestType is empty")
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

// ClearFaults removes every injected fault: refusal, delay and request
// errors. Safe for concurrent use.
func (s *Server) ClearFaults() {
	s.faults.refuse.Store(false)
	s.faults.delay.Store(0)
	s.faults.mu.Lock()
	clear(s.faults.errs)
	s.faults.mu.Unlock()
}

func (s *Server) requestError(requestType string) (int, bool) {
	s.faults.mu.Lock()
	defer s.faults.mu.Unlock()
	code, ok := s.faults.errs[requestType]
	return code, ok
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
	// Connections is the number of connections open at the time of the
	// snapshot, like [Server.ConnectionCount].
	Connections int
}

type counters struct {
	mu                                         sync.Mutex
	byType                                     map[string]int64
	total, pushes, acks, opened, refused, errs int64
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
		Connections:        n,
	}
}

// ResetStats sets every counter to zero. Safe for concurrent use.
func (s *Server) ResetStats() {
	c := &s.stats
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.byType)
	c.total, c.pushes, c.acks, c.opened, c.refused, c.errs = 0, 0, 0, 0, 0, 0
}
