package protocodec

// ErrNotMessage is Marshal's error for an argument that is not a message,
// for the _test package.
var ErrNotMessage = errNotMessage
