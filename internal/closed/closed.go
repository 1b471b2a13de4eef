// Package closed holds rebound's "closed" error family: each package's
// own closed sentinel, with its own text, matches rebound.ErrClosed.
package closed

import "errors"

// Err is rebound.ErrClosed.
var Err = errors.New("rebound: closed")

// familyError is a sentinel with its own text that matches Err with
// errors.Is. Wrapping with fmt.Errorf("...: %w", Err) would repeat the
// family's text in every message; this keeps one prefix per message.
type familyError struct{ msg string }

func (e *familyError) Error() string        { return e.msg }
func (e *familyError) Is(target error) bool { return target == Err }

// New returns a new sentinel error with text msg that matches Err.
// Each call returns a distinct error.
func New(msg string) error { return &familyError{msg: msg} }
