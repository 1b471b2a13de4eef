package etcd

import (
	"context"
	"errors"
	"fmt"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/subscriber"
)

var (
	// ErrNotConnected is returned (wrapped in an *OpError) by an attempt
	// made while the client has no usable connection to any member
	// (gRPC state TRANSIENT_FAILURE, or still connecting when the attempt
	// ends). It is transient. The attempt fails at once instead of
	// queueing a request that every waiting subscription would send the
	// moment the cluster comes back.
	ErrNotConnected = errors.New("etcd: not connected to the cluster")

	// ErrWatchClosed is the reason given to Sink.Resubscribe when a watch
	// channel closed without an error (the client's watch stream ended).
	ErrWatchClosed = errors.New("etcd: watch closed")
)

// OpError reports a failed etcd operation. It wraps the cause: match it
// with errors.Is (for example against rpctypes.ErrNoLeader,
// rpctypes.ErrCompacted, ErrNotConnected, subscriber.ErrRegistryClosed or
// context.DeadlineExceeded) and errors.As.
type OpError struct {
	// Op is the operation: "get", "watch", "grant", "put", "keepalive" or
	// "revoke".
	Op string
	// Key is the etcd key or key prefix the operation was about.
	Key string
	// Err is the cause.
	Err error
}

func (e *OpError) Error() string {
	return fmt.Sprintf("etcd: %s %s: %v", e.Op, e.Key, e.Err)
}

// Unwrap returns the cause.
func (e *OpError) Unwrap() error { return e.Err }

// closedError is the cause of an OpError when the Registry or the etcd
// client is closed: it wraps subscriber.ErrRegistryClosed and, if any,
// the error the client returned.
type closedError struct{ cause error }

func (e closedError) Error() string {
	if e.cause == nil {
		return subscriber.ErrRegistryClosed.Error()
	}
	return subscriber.ErrRegistryClosed.Error() + ": " + e.cause.Error()
}

func (e closedError) Unwrap() []error {
	if e.cause == nil {
		return []error{subscriber.ErrRegistryClosed}
	}
	return []error{subscriber.ErrRegistryClosed, e.cause}
}

// classify turns an error of the etcd client into the error an attempt
// returns (see the package documentation, "Errors"):
//
//   - the client (or the Registry) is closed: an *OpError wrapping
//     subscriber.ErrRegistryClosed, which stops a subscription for good;
//   - codes.PermissionDenied and codes.InvalidArgument (permission denied,
//     authentication failed, a request the server will always reject;
//     except rpctypes.ErrAuthOldRevision): an *OpError marked with
//     rebound.Permanent;
//   - everything else, in particular codes.Unavailable (no leader, leader
//     changed, server stopped, request timed out, connection refused),
//     codes.DeadlineExceeded, the attempt's own deadline, ErrCompacted and
//     resource exhaustion: a plain, transient *OpError.
func classify(op, key string, err error, closed bool) error {
	if err == nil {
		return nil
	}
	if closed {
		return &OpError{Op: op, Key: key, Err: closedError{cause: err}}
	}
	oe := &OpError{Op: op, Key: key, Err: err}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return oe
	}
	// The client refreshes its token on ErrAuthOldRevision; it can only
	// surface in a race with an auth change, which retrying fixes.
	if permanentCode(code(err)) && !errors.Is(err, rpctypes.ErrAuthOldRevision) {
		return rebound.Permanent(oe)
	}
	return oe
}

// code returns the gRPC code of err, looking through etcd's EtcdError
// and wrapped errors; codes.Unknown if it carries none.
func code(err error) codes.Code {
	var ee rpctypes.EtcdError
	if errors.As(err, &ee) {
		return ee.Code()
	}
	var se interface{ GRPCStatus() *status.Status }
	if errors.As(err, &se) {
		return se.GRPCStatus().Code()
	}
	return codes.Unknown
}

func permanentCode(c codes.Code) bool {
	switch c {
	case codes.PermissionDenied, codes.InvalidArgument:
		return true
	}
	return false
}
