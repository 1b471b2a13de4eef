package cluster

import "github.com/rebound-go/rebound"

// TransientError is rebound.TransientError.
//
// Deprecated: use rebound.TransientError; Transient now lives beside
// Permanent in package rebound.
type TransientError = rebound.TransientError

// Transient is rebound.Transient.
//
// Deprecated: use rebound.Transient.
func Transient(err error) error { return rebound.Transient(err) }

// IsTransient is rebound.IsTransient.
//
// Deprecated: use rebound.IsTransient.
func IsTransient(err error) bool { return rebound.IsTransient(err) }
