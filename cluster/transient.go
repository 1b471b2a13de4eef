package cluster

import "errors"

// TransientError marks an error as transient: the call may succeed if it is
// sent again later (for example "provider overloaded", "leader not elected
// yet"). Create it with Transient. Network errors need no marking: failback's
// default classifier already treats them as transient.
type TransientError struct {
	Err error
}

func (e *TransientError) Error() string { return e.Err.Error() }

// Unwrap returns the marked error, so errors.Is and errors.As see through
// the mark.
func (e *TransientError) Unwrap() error { return e.Err }

// Transient marks err as worth retrying. It returns nil for a nil err. An
// Invoker returns Transient(err) for a failure that is not a network error
// but that a later attempt may not hit; failback's default classifier
// retries such errors. A mark from rebound.Permanent, anywhere in the chain,
// still wins: failback never retries a permanent error.
func Transient(err error) error {
	if err == nil {
		return nil
	}
	return &TransientError{Err: err}
}

// IsTransient reports whether err, or any error it wraps, was marked with
// Transient.
func IsTransient(err error) bool {
	_, ok := errors.AsType[*TransientError](err)
	return ok
}
