package etcd

import (
	"context"
	"errors"
	"fmt"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/rebound-go/rebound"
)

var (
	// errNotConnected is the cause of an attempt made while the client has
	// no usable connection to any member: it fails at once instead of
	// queueing a request (transient).
	errNotConnected = errors.New("etcd: not connected to the cluster")

	// errWatchClosed is the reason given to Sink.Resubscribe when a watch
	// channel closed without an error.
	errWatchClosed = errors.New("etcd: watch closed")
)

// closedText starts the error of an operation on a closed Registry or
// client.
const closedText = "etcd: closed"

// registryName names this adapter (RegistrationStatus.Registry).
const registryName = "etcd"

// opErr returns the error of a failed operation, "etcd: op key: err",
// wrapping err.
func opErr(op, key string, err error) error {
	return fmt.Errorf("etcd: %s %s: %w", op, key, err)
}

// closedError is the cause of an operation's error when the Registry or the etcd
// client is closed: it wraps rebound.ErrClosed and, if any, the error the
// client returned.
type closedError struct{ cause error }

func (e closedError) Error() string {
	if e.cause == nil {
		return closedText
	}
	return closedText + ": " + e.cause.Error()
}

func (e closedError) Unwrap() []error {
	if e.cause == nil {
		return []error{rebound.ErrClosed}
	}
	return []error{rebound.ErrClosed, e.cause}
}

// classify turns an error of the etcd client into the error an attempt
// returns (see the package documentation, "Errors"):
//
//   - the client (or the Registry) is closed: an error wrapping
//     rebound.ErrClosed, which stops a subscription for good;
//   - codes.PermissionDenied and codes.InvalidArgument (permission denied,
//     authentication failed, a request the server will always reject;
//     except rpctypes.ErrAuthOldRevision): an error marked with
//     rebound.Permanent;
//   - everything else, in particular codes.Unavailable (no leader, leader
//     changed, server stopped, request timed out, connection refused),
//     codes.DeadlineExceeded, the attempt's own deadline, ErrCompacted and
//     resource exhaustion: a plain, transient error.
func classify(op, key string, err error, closed bool) error {
	if err == nil {
		return nil
	}
	if closed {
		return opErr(op, key, closedError{cause: err})
	}
	oe := opErr(op, key, err)
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
